/**
 * A folder laid out as a user's checkout for `deno task models add` of a
 * checkpoint: `config.toml` (root `models`, the tiny test set's runtime
 * settings), `models.lock` pinning only the tiny set's tokenizer and
 * scheduler files (what a single-file checkpoint takes from the pinned base
 * set) with those files under `models/sd15/`, and nothing else. Tests write
 * their checkpoints under `models/` and compare {@link snapshotTree} before
 * and after a run to prove what it wrote.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { type TestSd15, testSd15 } from "../../mod/checkpoint/testing.ts";
import { decodeImageInput, readPngText, toRgbImage } from "../../mod/image/mod.ts";
import { entryToml, parseLock, readDerivedRecord } from "../../mod/models/mod.ts";
import { modelsTask } from "./models_cli.ts";
import { ROOT } from "./paths.ts";
import { pngs, texts } from "./results.ts";
import { connectStdio } from "./stdio_server.ts";

/** The support files a checkpoint set copies, as the tiny lock pins them. */
const SUPPORT = [
  "sd15/tokenizer/vocab.json",
  "sd15/tokenizer/merges.txt",
  "sd15/scheduler/scheduler_config.json",
];

/** A workspace and its paths. */
export interface CheckpointWorkspace {
  /** The folder (the working directory for `modelsTask`). */
  dir: string;
  /** Its models root. */
  models: string;
  /** Its config file. */
  config: string;
  /** Removes it. */
  remove(): Promise<void>;
}

/**
 * Creates a workspace; `generation` is the `[generation]` table's body
 * (default: the quality preset, 2 steps, seed 7: one image per set).
 */
export async function checkpointWorkspace(
  generation =
    'preset = "quality"\nscheduler = "ddim"\nsteps = 1\nguidance_scale = 1.0\nseed = 7\nmax_wait_seconds = 0',
  extra = "",
): Promise<CheckpointWorkspace> {
  const dir = await Deno.makeTempDir({ prefix: "sd15-ckpt-add-" });
  const models = join(dir, "models");
  const tiny = join(ROOT, "tests/fixtures/tiny");
  const lock = parseLock(await Deno.readTextFile(join(tiny, "models.lock")));
  const entries = SUPPORT.map((p) => lock.files.find((f) => f.path === p)!);
  for (const p of SUPPORT) {
    await Deno.mkdir(join(models, p, ".."), { recursive: true });
    await Deno.copyFile(join(tiny, "models", p), join(models, p));
  }
  await Deno.writeTextFile(
    join(dir, "models.lock"),
    "# the tiny set's tokenizer and scheduler\n\n" + entries.map(entryToml).join("\n"),
  );
  const config = join(dir, "config.toml");
  await Deno.writeTextFile(
    config,
    `[server]\nenvironment = "local"\ndata_dir = ${JSON.stringify(join(dir, "data"))}\n\n` +
      `[models]\nroot = "models"\nbase = "sd15"\n\n` +
      `[runtime]\nintra_op_threads = 1\ninter_op_threads = 1\nwarm_up = false\n\n` +
      `[generation]\n${generation}\n${extra}`,
  );
  return { dir, models, config, remove: () => Deno.remove(dir, { recursive: true }) };
}

/** Every file and folder under `dir` with its size (folders: -1), sorted: what a run wrote. */
export async function snapshotTree(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (rel: string) => {
    for await (const e of Deno.readDir(join(dir, rel))) {
      const path = rel === "" ? e.name : `${rel}/${e.name}`;
      if (e.isDirectory) {
        out.push(`${path}/`);
        await walk(path);
      } else {
        const stat = await Deno.stat(join(dir, path));
        out.push(`${path} ${stat.size} ${stat.mtime?.getTime()}`);
      }
    }
  };
  await walk("");
  return out.sort();
}

/** The error lines of a run's stderr (the logger's `ERROR` lines). */
export function errorLines(stderr: string): string[] {
  return stderr.split("\n").filter((l) => / ERROR \[/.test(l));
}

/**
 * The test-sized SD 1.x model the checkpoint tests write in every layout:
 * the tiny fixtures' widths where the server meets them (UNet blocks
 * 8/16/32, text width 32, CLIP's 49408 tokens and 77 positions), so the
 * fixtures' ControlNets fit its residuals. Its values are the tooling's
 * divided by 8 (multiples of 1/512 within ±1/4, still exact in fp16 and
 * bf16): at full scale the images saturate, and a change (a LoRA, a VAE)
 * could not show in the pixels.
 */
export const MODEL: TestSd15 = (() => {
  const m = testSd15({ unetWidth: 8, vocab: 49408, positions: 77 });
  const scaled = (part: TestSd15["unet"]) =>
    new Map([...part].map(([k, t]) => [k, { shape: t.shape, data: t.data.map((x) => x / 8) }]));
  return { unet: scaled(m.unet), vae: scaled(m.vae), textEncoder: scaled(m.textEncoder) };
})();

/** `models add` in the workspace; asserts exit status 0. */
export async function add(ws: CheckpointWorkspace, ...args: string[]) {
  const run = await modelsTask(ws.dir, ["add", ...args]);
  assert.equal(run.code, 0, `models add ${args.join(" ")}:\n${run.stderr}${run.stdout}`);
  return run;
}

/** Each converted file's sha256 by name (from the set's `.derived.json`). */
export async function setHashes(ws: CheckpointWorkspace, path: string) {
  const record = await readDerivedRecord(join(ws.models, path));
  assert.ok(record, `${path} has no .derived.json`);
  return Object.fromEntries(record.files.map((f) => [f.name, f.sha256]));
}

/** The pixels of one image generated by the server on the workspace's config. */
export async function generate(
  ws: CheckpointWorkspace,
  tool = "generate_image",
  args: Record<string, unknown> = { positive_prompt: "a lighthouse", size: "square_512" },
): Promise<
  { pixels: Uint8Array; width: number; text: Record<string, string>; result: string; log: string }
> {
  const session = await connectStdio(["--config", ws.config]);
  try {
    const result = await session.client.callTool(
      { name: tool, arguments: args },
      undefined,
      { timeout: 300_000 },
    ).catch((e) => {
      throw new Error(`${tool}: ${e}\nthe server's log:\n${session.stderr()}`);
    });
    assert.equal(result.isError, undefined, texts(result) + session.stderr());
    // An image too large to inline comes as a smaller preview (and a link): decode what came.
    const [image] = pngs(result);
    assert.ok(image, `${tool} returned no image: ${texts(result)}`);
    const decoded = await decodeImageInput("input_image", image.toBase64());
    const rgb = await toRgbImage(decoded, decoded.width, decoded.height);
    const png = image[1] === 0x50 && image[2] === 0x4e && image[3] === 0x47;
    return {
      pixels: rgb.data,
      width: decoded.width,
      text: png ? readPngText(image) : {},
      result: texts(result),
      log: session.stderr(),
    };
  } finally {
    await session.close();
  }
}
