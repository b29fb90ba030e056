import { deepStrictEqual, ok, strictEqual, throws } from "node:assert";
import { encodePng, readPngText } from "./png.ts";
import { sharpLib as sharp } from "./sharp.ts";
import { bitwiseCrc32 } from "./testing.ts";

interface Chunk {
  type: string;
  data: Uint8Array;
  crcOk: boolean;
}

/** Splits a PNG into chunks with a straightforward reader of its own. */
function chunks(png: Uint8Array): Chunk[] {
  const view = new DataView(png.buffer, png.byteOffset, png.byteLength);
  const out: Chunk[] = [];
  for (let at = 8; at < png.length;) {
    const length = view.getUint32(at);
    const type = new TextDecoder("latin1").decode(png.subarray(at + 4, at + 8));
    const crc = view.getUint32(at + 8 + length);
    out.push({
      type,
      data: png.subarray(at + 8, at + 8 + length),
      crcOk: crc === bitwiseCrc32(png.subarray(at + 4, at + 8 + length)),
    });
    at += 12 + length;
  }
  return out;
}

const IMAGE = {
  width: 3,
  height: 2,
  data: Uint8Array.from([255, 0, 0, 0, 255, 0, 0, 0, 255, 1, 2, 3, 128, 64, 32, 250, 251, 252]),
};

const TEXT = {
  seed: "4294967295",
  size: "square_512",
  mode: "inpaint_image",
  timestamp: "2025-01-02T03:04:05.678Z",
  elapsed_seconds: "12.345",
};

Deno.test("encodePng writes tEXt chunks right after IHDR, all CRCs valid", async () => {
  const png = await encodePng(IMAGE, TEXT);
  const list = chunks(png);
  deepStrictEqual(list.map((c) => c.type).slice(0, 6), [
    "IHDR",
    "tEXt",
    "tEXt",
    "tEXt",
    "tEXt",
    "tEXt",
  ]);
  strictEqual(list[list.length - 1].type, "IEND");
  for (const chunk of list) ok(chunk.crcOk, `CRC of ${chunk.type}`);
  // tEXt layout: keyword, NUL, Latin-1 text.
  const latin1 = new TextDecoder("latin1");
  const texts = list.filter((c) => c.type === "tEXt").map((c) => latin1.decode(c.data));
  deepStrictEqual(texts, Object.entries(TEXT).map(([k, v]) => `${k}\0${v}`));
});

Deno.test("readPngText round-trips the metadata, Latin-1 included", async () => {
  const text = { ...TEXT, note: "café ±1" };
  deepStrictEqual(readPngText(await encodePng(IMAGE, text)), text);
});

Deno.test("the PNG decodes (sharp) to the exact pixels", async () => {
  const png = await encodePng(IMAGE, TEXT);
  const { data, info } = await sharp(png).raw().toBuffer({ resolveWithObject: true });
  deepStrictEqual([info.width, info.height, info.channels], [3, 2, 3]);
  deepStrictEqual(new Uint8Array(data), IMAGE.data);
});

Deno.test("readPngText rejects a tEXt chunk whose CRC does not match", async () => {
  const png = await encodePng(IMAGE, { seed: "1" });
  png[33 + 8] ^= 0x20; // first keyword byte of the tEXt right after IHDR
  throws(() => readPngText(png), /CRC/);
});

Deno.test("text outside Latin-1 goes in an iTXt chunk (UTF-8) and reads back; sharp still decodes", async () => {
  const text = { seed: "1", prompt: "a (cat:1.2) 日本の庭, café 🐈", note: "plain" };
  const png = await encodePng(IMAGE, text);
  const list = chunks(png);
  deepStrictEqual(list.slice(1, 4).map((c) => c.type), ["tEXt", "iTXt", "tEXt"]);
  for (const chunk of list) ok(chunk.crcOk, `CRC of ${chunk.type}`);
  // iTXt layout: keyword, NUL, flag 0, method 0, empty language NUL, empty translated NUL, UTF-8.
  const itxt = list[2].data;
  deepStrictEqual(Array.from(itxt.subarray(0, 11)), [
    ...new TextEncoder().encode("prompt"),
    0,
    0,
    0,
    0,
    0,
  ]);
  deepStrictEqual(readPngText(png), text);
  const { data } = await sharp(png).raw().toBuffer({ resolveWithObject: true });
  deepStrictEqual(new Uint8Array(data), IMAGE.data);
});

Deno.test("encodePng rejects invalid keywords", async () => {
  for (const key of ["", " seed", "a  b", "x".repeat(80), "ключ"]) {
    await encodePng(IMAGE, { [key]: "v" }).then(
      () => ok(false, `keyword ${JSON.stringify(key)} accepted`),
      (error) => ok(error instanceof RangeError, String(error)),
    );
  }
});
