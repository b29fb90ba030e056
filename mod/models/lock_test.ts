import { deepStrictEqual, rejects, strictEqual, throws } from "node:assert";
import {
  LockError,
  parseComponentList,
  parseModelsLock,
  readLock,
  readModelsLock,
  selectComponents,
} from "./lock.ts";

const SHA = "a".repeat(64);
const REV = "0123456789abcdef0123456789abcdef01234567";

function lockText(fields: Record<string, string | number>[]): string {
  return fields.map((f) =>
    "[[file]]\n" +
    Object.entries(f).map(([k, v]) => `${k} = ${typeof v === "string" ? JSON.stringify(v) : v}`)
      .join("\n")
  ).join("\n\n");
}

const GOOD = {
  component: "unet",
  path: "sd15/unet/model.onnx",
  url: `https://huggingface.co/owner/repo/resolve/${REV}/unet/model.onnx`,
  size: 1234,
  sha256: SHA,
};

Deno.test("parseModelsLock: a valid lock", () => {
  const entries = parseModelsLock(
    "# comment\n" + lockText([
      GOOD,
      {
        component: "tokenizer",
        path: "sd15/tokenizer/vocab.json",
        url: "http://127.0.0.1:8080/vocab.json",
        size: 0,
        sha256: "b".repeat(64),
      },
      {
        component: "depth",
        path: "annotators/depth.onnx",
        url: "fixture://tiny/depth.onnx",
        size: 3_441_325_459,
        sha256: "c".repeat(64),
      },
    ]),
  );
  deepStrictEqual(entries[0], GOOD);
  strictEqual(entries.length, 3);
  strictEqual(entries[2].size, 3_441_325_459);
  deepStrictEqual(parseModelsLock(""), []);
});

/** Asserts that parsing fails with a message matching every pattern. */
function fails(text: string, ...patterns: RegExp[]): void {
  throws(() => parseModelsLock(text, "test.lock"), (e: unknown) => {
    if (!(e instanceof LockError)) return false;
    for (const p of patterns) {
      if (!p.test(e.message)) throw new Error(`message ${JSON.stringify(e.message)} lacks ${p}`);
    }
    return true;
  });
}

Deno.test("parseModelsLock: errors name the file, entry, field and value", () => {
  fails("[[file]\n", /^test\.lock: invalid TOML/);
  fails("version = 1\n", /unknown top-level key "version"/);
  fails("file = 3\n", /"file" must be an array of tables/);
  fails(
    lockText([{ ...GOOD, extra: "x" }]),
    /entry 1 \(path "sd15\/unet\/model\.onnx"\): unknown field "extra"/,
  );
  const { sha256: _, ...noSha } = GOOD;
  fails(lockText([noSha]), /entry 1 .*missing field "sha256"/);
  fails(
    lockText([GOOD, { ...GOOD, path: "x.onnx", component: "unets" }]),
    /^test\.lock: \[\[file\]\] entry 2 \(path "x\.onnx"\): field "component" must be one of text_encoder\|unet\|/,
    /got "unets"$/,
  );
  fails(
    lockText([{ ...GOOD, path: "/abs/model.onnx" }]),
    /field "path" must be relative to the models root, got "\/abs\/model\.onnx"/,
  );
  fails(
    lockText([{ ...GOOD, path: "sd15/../x.onnx" }]),
    /field "path" must not contain empty, "\." or "\.\." segments/,
  );
  fails(
    lockText([{ ...GOOD, path: "sd15\\unet\\model.onnx" }]),
    /field "path" must use "\/" separators/,
  );
  fails(lockText([{ ...GOOD, path: "x.onnx.partial" }]), /reserved for downloads in progress/);
  fails(
    lockText([{ ...GOOD, url: "https://huggingface.co/owner/repo/resolve/main/unet/model.onnx" }]),
    /field "url" must be https:\/\/huggingface\.co\/<owner>\/<repo>\/resolve\/<40-hex commit>\/<file>/,
    /got "https:\/\/huggingface\.co\/owner\/repo\/resolve\/main\/unet\/model\.onnx"/,
  );
  fails(
    lockText([{ ...GOOD, url: "http://example.com/x" }]),
    /plain http is allowed only for 127\.0\.0\.1/,
  );
  fails(lockText([{ ...GOOD, url: "ftp://example.com/x" }]), /field "url" must be https/);
  fails(
    lockText([{ ...GOOD, url: "not a url" }]),
    /field "url" is not a valid URL, got "not a url"/,
  );
  fails(
    lockText([{ ...GOOD, size: -1 }]),
    /field "size" must be a non-negative integer number of bytes, got -1/,
  );
  fails(lockText([{ ...GOOD, size: 1.5 }]), /field "size" .* got 1\.5/);
  fails(lockText([{ ...GOOD, size: "12" }]), /field "size" .* got "12"/);
  fails(
    '[[file]]\ncomponent="unet"\npath="a"\nurl="fixture://a"\nsha256="' + SHA +
      '"\nsize=99999999999999999999\n',
    /field "size" .* got 99999999999999999999/,
  );
  fails(
    lockText([{ ...GOOD, sha256: SHA.toUpperCase() }]),
    /field "sha256" must be 64 lowercase hex digits/,
  );
  fails(lockText([{ ...GOOD, sha256: "abc" }]), /field "sha256" .* got "abc"/);
  fails(
    lockText([GOOD, GOOD]),
    /entry 2 .*path "sd15\/unet\/model\.onnx" is already listed by entry 1/,
  );
});

Deno.test("readModelsLock: a missing file names the path", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/nope.lock`;
    await rejects(readModelsLock(path), (e: unknown) => {
      return e instanceof LockError && e.message.startsWith(`cannot read ${path}`);
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("readModelsLock: models.local.lock beside it is read over it, entry by path", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const lock = `${dir}/models.lock`;
    const overlay = `${dir}/models.local.lock`;
    const vae = { ...GOOD, component: "vae_decoder", path: "sd15/vae_decoder/model.onnx" };
    await Deno.writeTextFile(lock, lockText([GOOD, vae]));
    // No overlay: the lock alone.
    deepStrictEqual((await readModelsLock(lock)).map((e) => e.path), [GOOD.path, vae.path]);
    // The overlay's entry for the same path wins (a local file: no url); its own entries join.
    const mine = { component: "unet", path: GOOD.path, size: 5, sha256: "b".repeat(64) };
    const extra = { component: "lora", path: "lora/mine.safetensors", size: 7, sha256: SHA };
    await Deno.writeTextFile(overlay, lockText([mine, extra]));
    deepStrictEqual(await readModelsLock(lock), [
      { component: "vae_decoder", path: vae.path, url: GOOD.url, size: GOOD.size, sha256: SHA },
      { component: "unet", path: GOOD.path, size: 5, sha256: "b".repeat(64) },
      { component: "lora", path: extra.path, size: 7, sha256: SHA },
    ]);
    // A broken overlay is named, not the lock.
    await Deno.writeTextFile(overlay, lockText([{ ...mine, size: -1 }]));
    await rejects(readModelsLock(lock), (e: unknown) => {
      return e instanceof LockError && e.message.startsWith(`${overlay}: [[file]] entry 1`);
    });
    // The overlay alone is enough when the lock is missing.
    await Deno.writeTextFile(overlay, lockText([extra]));
    await Deno.remove(lock);
    deepStrictEqual((await readModelsLock(lock)).map((e) => e.path), [extra.path]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("readLock: [[derived]] with models.local.lock: the overlay replaces what lies at its paths", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const lock = `${dir}/models.lock`;
    const overlay = `${dir}/models.local.lock`;
    const taesd = {
      component: "vae_decoder",
      path: "taesd/taesd_decoder.safetensors",
      size: 9,
      sha256: SHA,
    };
    const derived = (path: string, from: string, converter = "taesd") =>
      `\n\n[[derived]]\ncomponent = "vae_decoder"\npath = "${path}"\n` +
      `converter = "${converter}"\nfrom = ["${from}"]\n`;
    await Deno.writeTextFile(
      lock,
      lockText([GOOD, taesd]) + derived("taesd/vae_decoder", taesd.path),
    );
    const shipped = await readLock(lock);
    deepStrictEqual(shipped.derived.map((d) => [d.path, d.outputs]), [
      ["taesd/vae_decoder", ["taesd/vae_decoder/model.onnx"]],
    ]);

    // An own ONNX decoder locked where the derived one would be made: the file wins.
    const own = {
      component: "vae_decoder",
      path: "taesd/vae_decoder/model.onnx",
      size: 3,
      sha256: SHA,
    };
    await Deno.writeTextFile(overlay, lockText([own]));
    const withFile = await readLock(lock);
    deepStrictEqual(withFile.derived, []);
    deepStrictEqual(withFile.files.map((f) => f.path), [GOOD.path, taesd.path, own.path]);

    // An overlay [[derived]] may take its inputs from the shipped lock, and replaces the
    // shipped folder of its path.
    await Deno.writeTextFile(overlay, derived("taesd/vae_decoder", taesd.path).trimStart());
    const replaced = await readLock(lock);
    deepStrictEqual(replaced.derived.map((d) => d.path), ["taesd/vae_decoder"]);
    // One in another folder joins the shipped one.
    await Deno.writeTextFile(overlay, derived("mine/vae_decoder", taesd.path).trimStart());
    deepStrictEqual((await readLock(lock)).derived.map((d) => d.path), [
      "taesd/vae_decoder",
      "mine/vae_decoder",
    ]);
    // A folder over the lock's files drops them; one over the shipped folder replaces it.
    await Deno.writeTextFile(overlay, derived("taesd", taesd.path).trimStart());
    await rejects(readLock(lock), (e: unknown) => {
      // Its own input lay inside it: dropped with the folder, so the input is gone.
      return e instanceof LockError &&
        e.message.startsWith(`${overlay}: [[derived]] entry 1 (path "taesd")`) &&
        /"taesd\/taesd_decoder\.safetensors" is not one/.test(e.message);
    });
    // The overlay's inputs must exist in one of the two files; the error names the overlay.
    await Deno.writeTextFile(
      overlay,
      derived("mine/vae_decoder", "lora/nope.safetensors").trimStart(),
    );
    await rejects(readLock(lock), (e: unknown) => {
      return e instanceof LockError &&
        e.message.startsWith(`${overlay}: [[derived]] entry 1 (path "mine/vae_decoder")`);
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("component lists: parse and select", () => {
  deepStrictEqual(parseComponentList("unet, vae_decoder,,"), ["unet", "vae_decoder"]);
  throws(() => parseComponentList("unet,vae"), /unknown component "vae"/);
  const entries = parseModelsLock(
    lockText([GOOD, { ...GOOD, component: "vae_decoder", path: "sd15/vae_decoder/model.onnx" }]),
  );
  deepStrictEqual(selectComponents(entries, ["vae_decoder"]).map((e) => e.path), [
    "sd15/vae_decoder/model.onnx",
  ]);
  strictEqual(selectComponents(entries, []).length, 2);
});

Deno.test("readLock: a set converter's [[derived]] lists its options and outputs, both checked", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const lock = `${dir}/models.lock`;
    const ck = { component: "unet", path: "ck/model.safetensors", size: 9, sha256: SHA };
    const support = ["sd15/tokenizer/vocab.json", "sd15/tokenizer/merges.txt"].map((path) => ({
      component: "tokenizer",
      path,
      size: 1,
      sha256: SHA,
    }));
    const table = (extra: string) =>
      `\n\n[[derived]]\ncomponent = "unet"\npath = "converted/model-fp32"\n` +
      `converter = "sd15-checkpoint"\nfrom = ${
        JSON.stringify([ck.path, ...support.map((s) => s.path)])
      }\n${extra}`;
    const files = lockText([ck, ...support]);
    await Deno.writeTextFile(
      lock,
      files + table(
        `options = { precision = "fp32", ema = false }\n` +
          `outputs = ["unet/model.onnx", "tokenizer/vocab.json"]\n`,
      ),
    );
    const read = await readLock(lock);
    deepStrictEqual(read.derived.map((d) => [d.converter, d.options, d.outputs]), [[
      "sd15-checkpoint",
      { precision: "fp32", ema: false },
      ["converted/model-fp32/unet/model.onnx", "converted/model-fp32/tokenizer/vocab.json"],
    ]]);
    const refused = async (extra: string, re: RegExp) => {
      await Deno.writeTextFile(lock, files + table(extra));
      await rejects(readLock(lock), (e: unknown) => e instanceof LockError && re.test(e.message));
    };
    await refused(`outputs = ["unet/model.onnx"]\n`, /field "options" needs options/);
    await refused(
      `options = { precision = "fp8" }\noutputs = ["unet/model.onnx"]\n`,
      /option "precision" must be "fp32" or "fp16", got "fp8"/,
    );
    await refused(`options = { precision = "fp16" }\n`, /field "outputs" must list the file names/);
    await refused(
      `options = { precision = "fp16" }\noutputs = ["../x"]\n`,
      /field "outputs" must list/,
    );
    // A file converter takes neither.
    await Deno.writeTextFile(
      lock,
      files +
        `\n\n[[derived]]\ncomponent = "tokenizer"\npath = "t"\nconverter = "copy"\n` +
        `from = ["sd15/tokenizer/vocab.json"]\noutputs = ["vocab.json"]\n`,
    );
    await rejects(
      readLock(lock),
      (e: unknown) => e instanceof LockError && /unknown field "outputs"/.test(e.message),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
