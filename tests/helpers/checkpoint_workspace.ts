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

import { join } from "node:path";
import { parseLock } from "../../mod/models/mod.ts";
import { entryToml } from "../../mod/models/mod.ts";
import { ROOT } from "./paths.ts";

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
 * (default: the quality preset, 2 steps).
 */
export async function checkpointWorkspace(
  generation = 'preset = "quality"\nsteps = 2',
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
      `[runtime]\nintra_op_threads = 1\ninter_op_threads = 1\n\n` +
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
