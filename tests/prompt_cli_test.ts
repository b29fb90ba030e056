/**
 * `deno task prompt` as a user runs it: the configured tokenizer (the tiny set's, which is SD
 * 1.5's real vocabulary) and the configured embeddings, the report in text and JSON, standard
 * input, and one clear line for each problem.
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { encodeSafetensors } from "./fixtures/builder/lora.ts";
import { ROOT } from "./helpers/paths.ts";

const TINY_MODELS = join(ROOT, "tests/fixtures/tiny/models");
const BOS = 49406;
const EOS = 49407;
const CAT = 2368;
const DOG = 1929;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function promptTask(args: string[], stdin?: string): Promise<Run> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["task", "--quiet", "prompt", ...args],
    cwd: ROOT,
    env: { NO_COLOR: "1" },
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(stdin));
    await writer.close();
  }
  const out = await child.output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** A config on the tiny models with one embedding, `EasyNegative`, of two vectors. */
async function withSetup(
  fn: (config: string, dir: string, hash: string) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "prompt_cli_" });
  try {
    const bytes = encodeSafetensors([{
      name: "emb_params",
      dtype: "F32",
      shape: [2, 768],
      data: Float32Array.from({ length: 1536 }, (_, i) => (i % 9) / 9),
    }]);
    const file = join(dir, "EasyNegative.safetensors");
    await Deno.writeFile(file, bytes);
    const config = join(dir, "config.toml");
    await Deno.writeTextFile(
      config,
      `[models]\nroot = ${JSON.stringify(TINY_MODELS)}\nbase = "sd15"\n\n` +
        `[prompt]\nembeddings = [${JSON.stringify(file)}]\n`,
    );
    await fn(config, dir, createHash("sha256").update(bytes).digest("hex").slice(0, 12));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

interface Report {
  token_count: number;
  chunks: Array<{
    tokens: number[];
    multipliers: number[];
    embeddings: Array<{ offset: number; name: string }>;
    text: string;
  }>;
  embeddings_used: Array<{ name: string; hash: string; vectors: number }>;
}

Deno.test("deno task prompt --json: a 160-token prompt in three chunks, weights and an embedding", async () => {
  await withSetup(async (config, _dir, hash) => {
    // 100 cats, 58 weighted dogs, the embedding (2 vectors): 160 positions, 75 + 75 + 10.
    const text = `${"cat ".repeat(100)}(${"dog ".repeat(58)}:1.3) easynegative`;
    const run = await promptTask(["--json", "--config", config, text]);
    assert.equal(run.code, 0, run.stderr);
    const report = JSON.parse(run.stdout) as Report;
    assert.equal(report.token_count, 160);
    assert.equal(report.chunks.length, 3);
    for (const c of report.chunks) {
      assert.equal(c.tokens.length, 77);
      assert.equal(c.multipliers.length, 77);
      assert.equal(c.tokens[0], BOS);
      assert.equal(c.tokens[76], EOS);
    }
    assert.deepEqual(report.chunks[0].tokens.slice(1, 76), Array(75).fill(CAT));
    assert.deepEqual(report.chunks[1].tokens.slice(1, 76), [
      ...Array(25).fill(CAT),
      ...Array(50).fill(DOG),
    ]);
    assert.deepEqual(report.chunks[1].multipliers.slice(26, 76), Array(50).fill(1.3));
    // The last chunk: 8 dogs, then the embedding's two rows (after the 49408-id vocabulary).
    assert.deepEqual(report.chunks[2].tokens.slice(0, 12), [
      BOS,
      ...Array(8).fill(DOG),
      49408,
      49409,
      EOS,
    ]);
    assert.deepEqual(report.chunks[2].embeddings, [{ offset: 9, name: "EasyNegative" }]);
    assert.match(report.chunks[2].text, /^dog( dog){7} <EasyNegative>$/);
    assert.deepEqual(report.embeddings_used, [{ name: "EasyNegative", hash, vectors: 2 }]);
  });
});

Deno.test("deno task prompt: the report in words, from an argument or standard input", async () => {
  await withSetup(async (config, _dir, hash) => {
    const run = await promptTask(["--config", config, "a (cat) BREAK [dog], EasyNegative"]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(
      run.stdout,
      /^token count: 79 \(2 chunks of 77 positions: 154 for the text encoder\)$/m,
    );
    assert.match(
      run.stdout,
      new RegExp(`^embeddings used: EasyNegative \\(2 vectors, TI hash ${hash}\\)$`, "m"),
    );
    assert.match(run.stdout, /^chunk 1 of 2: 2 tokens, then EOS and padding to 77$/m);
    assert.match(run.stdout, /^ {2}words: a cat$/m);
    assert.match(run.stdout, /^ {4}2 {2}2368 {3}1\.1 {5}cat<\/w>$/m);
    assert.match(run.stdout, /^ {4}1 {2}1929 {3}0\.9091 {2}dog<\/w>$/m);
    assert.match(run.stdout, /^ {4}3 {2}49408 {2}1 {7}<EasyNegative 1\/2>$/m);

    const piped = await promptTask(
      ["--config", config, "-"],
      "a (cat) BREAK [dog], EasyNegative\n",
    );
    assert.equal(piped.code, 0, piped.stderr);
    assert.equal(piped.stdout, run.stdout);
  });
});

Deno.test("deno task prompt: one clear line for each problem", async () => {
  await withSetup(async (config, dir) => {
    const badWeight = await promptTask(["--config", config, "(cat:1.2.3)"]);
    assert.equal(badWeight.code, 1);
    assert.match(badWeight.stderr, /prompt weight "1\.2\.3" .* is not a number/);
    assert.equal(badWeight.stdout, "");

    const none = await promptTask(["--config", config]);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /no prompt given: pass TEXT, or - to read it from standard input/);

    const unknown = await promptTask(["--config", config, "--jsn", "cat"]);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /--jsn/);

    // No tokenizer where the config says: the fix is named.
    const empty = join(dir, "empty.toml");
    await Deno.writeTextFile(
      empty,
      `[models]\nroot = ${JSON.stringify(join(dir, "nothing"))}\nbase = "sd15"\n`,
    );
    const noTokenizer = await promptTask(["--config", empty, "cat"]);
    assert.equal(noTokenizer.code, 2);
    assert.match(noTokenizer.stderr, /CLIP tokenizer not found in .*nothing\/sd15\/tokenizer/);
    assert.match(noTokenizer.stderr, /run `deno task models`.* --tokenizer DIR/);
    // --tokenizer names one.
    const named = await promptTask([
      "--config",
      empty,
      "--tokenizer",
      join(TINY_MODELS, "sd15/tokenizer"),
      "--json",
      "cat",
    ]);
    assert.equal(named.code, 0, named.stderr);
    assert.equal((JSON.parse(named.stdout) as Report).chunks[0].tokens[1], CAT);

    // Two embeddings the tokenizer cannot tell apart.
    const twice = join(dir, "twice.toml");
    await Deno.copyFile(join(dir, "EasyNegative.safetensors"), join(dir, "copy.safetensors"));
    await Deno.writeTextFile(
      twice,
      (await Deno.readTextFile(config)).replace(
        /^embeddings = \[(.*)\]$/m,
        `embeddings = [$1, { path = ${JSON.stringify(join(dir, "copy.safetensors"))}, ` +
          `name = "easynegative" }]`,
      ),
    );
    const same = await promptTask(["--config", twice, "cat"]);
    assert.equal(same.code, 2);
    assert.match(
      same.stderr,
      /\[prompt\] embeddings: embeddings "EasyNegative" and "easynegative" are the same word/,
    );

    // A configured embedding that is not there.
    await Deno.remove(join(dir, "EasyNegative.safetensors"));
    const gone = await promptTask(["--config", config, "cat"]);
    assert.equal(gone.code, 2);
    assert.match(
      gone.stderr,
      /\[prompt\] embeddings: .*EasyNegative\.safetensors: embedding file not found/,
    );
  });
});
