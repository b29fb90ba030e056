/**
 * Benchmarks of the image input and output path at its limits:
 *
 * - the input path of a ~36-megapixel JPEG and PNG (6000×6000; a photo
 *   and an illustration, see {@link testPicture}) to 512×512: libvips
 *   decode (`decodeRgb`) + the PIL-exact Lanczos (`resizeLanczos`) as
 *   `toRgbImage` runs them, and each half alone, next to PIL doing the same
 *   (`Image.open` + `resize(LANCZOS)`, the reference pipeline's path) in
 *   the same run, when `/usr/bin/python3` has PIL (Debian `python3-pil`;
 *   otherwise those rows are left out and a log line says so). PIL runs in
 *   one long-lived `pil_bench.py` process fed one command per iteration,
 *   so its rows hold no interpreter start-up, only a pipe round trip;
 * - for the JPEG as a data URI, `decodeImageInput` (data-URI split,
 *   canonical-base64 check, native base64 decode, magic bytes and header
 *   limits);
 * - canonical-base64 validation (`checkBase64`) and validation + decode
 *   (`decodeBase64`) of a string at the 36,000,000-character limit;
 * - `encodePng` of a 512×512 RGB image with the five tEXt metadata chunks.
 *
 * The test images are made once with sharp (`sharpLib`, this folder's door
 * to sharp) and kept in `.cache/bench/image/` (git-ignored); both are
 * under the base64 input limit, as real inputs must be.
 *
 * Run: `deno bench -P=test bench/image_bench.ts`.
 *
 * @module
 */

import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { log } from "../mod/log/mod.ts";
import { checkBase64, decodeBase64 } from "../mod/image/base64.ts";
import { decodeImageInput, toRgbImage } from "../mod/image/decode.ts";
import { resizeLanczos } from "../mod/image/lanczos.ts";
import { MAX_BASE64_LENGTH } from "../mod/image/limits.ts";
import { encodePng } from "../mod/image/png.ts";
import { decodeRgb, sharpLib } from "../mod/image/sharp.ts";
import type { DecodedImage } from "../mod/image/types.ts";

const CACHE = fileURLToPath(new URL("../.cache/bench/image/", import.meta.url));
const PIL_WORKER = fileURLToPath(new URL("./pil_bench.py", import.meta.url));
const PYTHON = "/usr/bin/python3";
const SIDE = 6000;
const TARGET = 512;

/**
 * 6000×6000 RGB over smooth gradients: for the JPEG a photo (a ripple
 * texture and ±16 xorshift noise), for the PNG an illustration (the ripple
 * posterised into flat bands with hard edges, no noise), since a photo as a
 * 36 MP PNG is 40–90 MB, far over the input limit.
 */
function testPicture(kind: "photo" | "illustration"): Uint8Array {
  const raw = new Uint8Array(SIDE * SIDE * 3);
  let state = 12345;
  for (let y = 0; y < SIDE; y++) {
    for (let x = 0; x < SIDE; x++) {
      const wave = Math.sin(x * 0.05) * Math.cos(y * 0.031);
      let ripple = 8 * Math.round(5 * wave);
      let n = 0;
      if (kind === "photo") {
        state ^= state << 13;
        state ^= state >>> 17;
        state ^= state << 5;
        n = (state & 31) - 16;
        ripple = 40 * wave;
      }
      const i = (y * SIDE + x) * 3;
      raw[i] = (x * 200) / SIDE + ripple + n + 20;
      raw[i + 1] = (y * 200) / SIDE - ripple + n + 20;
      raw[i + 2] = 128 + ripple + n;
    }
  }
  return raw;
}

/** The test file `name`, built once with sharp and cached. */
async function testImage(name: string, format: "jpeg" | "png"): Promise<string> {
  const path = join(CACHE, name);
  try {
    await Deno.stat(path);
    return path;
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  const started = performance.now();
  const raw = testPicture(format === "jpeg" ? "photo" : "illustration");
  const pipeline = sharpLib(raw, { raw: { width: SIDE, height: SIDE, channels: 3 } });
  const encoded =
    await (format === "jpeg"
      ? pipeline.jpeg({ quality: 90 })
      : pipeline.png({ compressionLevel: 6 })).toBuffer();
  await Deno.mkdir(CACHE, { recursive: true });
  await Deno.writeFile(path, new Uint8Array(encoded));
  log("info", "bench", "wrote a test image", {
    path,
    bytes: encoded.length,
    encodeMs: Math.round(performance.now() - started),
  });
  return path;
}

const files = {
  JPEG: await testImage(`photo_${SIDE}x${SIDE}_q90.jpg`, "jpeg"),
  PNG: await testImage(`illustration_${SIDE}x${SIDE}.png`, "png"),
};

/** PIL in a long-lived `pil_bench.py` process, or undefined when Python or PIL is missing. */
async function startPil(): Promise<
  { version: string; run(line: string): Promise<void> } | undefined
> {
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(PYTHON, {
      args: [PIL_WORKER, ...Object.entries(files).map(([name, path]) => `${name}=${path}`)],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
    log("warn", "bench", `no ${PYTHON}: the PIL rows are left out`);
    return undefined;
  }
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  const readLine = async (): Promise<string | undefined> => {
    while (!buffered.includes("\n")) {
      const { value, done } = await lines.read();
      if (done) return undefined;
      buffered += value;
    }
    const at = buffered.indexOf("\n");
    const line = buffered.slice(0, at);
    buffered = buffered.slice(at + 1);
    return line;
  };
  const ready = await readLine();
  if (!ready?.startsWith("ready ")) {
    log(
      "warn",
      "bench",
      `${PYTHON} has no PIL (Debian: apt-get install python3-pil): the PIL rows are left out`,
    );
    return undefined;
  }
  // Held only while a command runs: the bench ends without waiting for the
  // worker, whose stdin then closes, and end of input ends it.
  child.unref();
  const writer = child.stdin.getWriter();
  const encoder = new TextEncoder();
  return {
    version: ready.slice("ready ".length),
    async run(line: string): Promise<void> {
      child.ref();
      await writer.write(encoder.encode(`${line}\n`));
      const answer = await readLine();
      child.unref();
      if (answer !== "ok") throw new Error(`pil_bench.py answered ${answer} to ${line}`);
    },
  };
}

const pil = await startPil();

for (const [format, path] of Object.entries(files)) {
  const bytes = await Deno.readFile(path);
  const decoded: DecodedImage = {
    field: "input_image",
    format: format === "JPEG" ? "jpeg" : "png",
    bytes,
    width: SIDE,
    height: SIDE,
  };
  const pixels = await decodeRgb(bytes);
  log("info", "bench", `36 MP ${format} input`, {
    bytes: bytes.length,
    pil: pil?.version ?? "none",
  });
  const stages = [
    {
      stage: "decode + resize",
      ours: "toRgbImage (sharp decode + resizeLanczos)",
      fn: () => toRgbImage(decoded, TARGET, TARGET),
      theirs: "Image.open + resize(LANCZOS)",
      command: "decode_resize",
    },
    {
      stage: "decode",
      ours: "decodeRgb (sharp)",
      fn: () => decodeRgb(bytes),
      theirs: "Image.open + load",
      command: "decode",
    },
    {
      stage: "resize",
      ours: "resizeLanczos",
      fn: () => resizeLanczos(pixels, TARGET, TARGET),
      theirs: "resize(LANCZOS)",
      command: "resize",
    },
  ];
  for (const { stage, ours, fn, theirs, command } of stages) {
    const group = `${SIDE}×${SIDE} ${format} → ${TARGET}×${TARGET}: ${stage}`;
    Deno.bench({
      name: `ours: ${ours}`,
      group,
      baseline: true,
      n: 5,
      warmup: 1,
      async fn() {
        await fn();
      },
    });
    if (!pil) continue;
    Deno.bench({
      name: `PIL ${pil.version}: ${theirs}`,
      group,
      n: 5,
      warmup: 1,
      async fn() {
        await pil.run(`${command} ${format}`);
      },
    });
  }
}

const jpeg = await Deno.readFile(files.JPEG);
const dataUri = `data:image/jpeg;base64,${jpeg.toBase64()}`;
if (dataUri.length - "data:image/jpeg;base64,".length > MAX_BASE64_LENGTH) {
  throw new Error(`the test JPEG is too large for the base64 limit: ${jpeg.length} bytes`);
}
const png = await Deno.readFile(files.PNG);
if (Math.ceil(png.length / 3) * 4 > MAX_BASE64_LENGTH) {
  throw new Error(`the test PNG is too large for the base64 limit: ${png.length} bytes`);
}

Deno.bench({
  name: "decodeImageInput (validate + base64 decode + sniff)",
  group: `${SIDE}×${SIDE} JPEG data URI`,
  baseline: true,
  n: 10,
  warmup: 2,
  async fn() {
    await decodeImageInput("input_image", dataUri);
  },
});

Deno.bench({
  name: "decodeImageInput + toRgbImage",
  group: `${SIDE}×${SIDE} JPEG data URI`,
  n: 5,
  warmup: 1,
  async fn() {
    await toRgbImage(await decodeImageInput("input_image", dataUri), TARGET, TARGET);
  },
});

// A valid base64 payload of exactly the limit (36,000,000 characters, a
// multiple of 4, so no padding): 27,000,000 bytes of varied content.
const limitBytes = new Uint8Array((MAX_BASE64_LENGTH / 4) * 3);
for (let i = 0; i < limitBytes.length; i++) limitBytes[i] = (i * 2654435761) >>> 24;
const limitBase64 = limitBytes.toBase64();
if (limitBase64.length !== MAX_BASE64_LENGTH) {
  throw new Error(`expected ${MAX_BASE64_LENGTH} characters, got ${limitBase64.length}`);
}

Deno.bench({
  name: "checkBase64 (canonical check only)",
  group: `base64 at the limit (${MAX_BASE64_LENGTH.toLocaleString("en")} characters)`,
  baseline: true,
  n: 10,
  warmup: 2,
  fn() {
    checkBase64("input_image", limitBase64);
  },
});

Deno.bench({
  name: "decodeBase64 (check + native decode)",
  group: `base64 at the limit (${MAX_BASE64_LENGTH.toLocaleString("en")} characters)`,
  n: 10,
  warmup: 2,
  fn() {
    decodeBase64("input_image", limitBase64);
  },
});

const picture = { width: TARGET, height: TARGET, data: new Uint8Array(TARGET * TARGET * 3) };
for (let i = 0; i < picture.data.length; i++) {
  picture.data[i] = (Math.sin(i * 0.001) * 100 + (i % 97)) & 255;
}
const metadata = {
  seed: "1234567890",
  size: "square_512",
  mode: "text_to_image",
  timestamp: "2026-01-01T00:00:00Z",
  elapsed_seconds: "12.34",
};

Deno.bench({
  name: `encodePng ${TARGET}×${TARGET} RGB + 5 tEXt chunks`,
  group: "PNG output",
  n: 20,
  warmup: 2,
  async fn() {
    await encodePng(picture, metadata);
  },
});
