/**
 * Copies a folder tree for tests that stage model files (a fixture set, an
 * export), leaving out dot entries: the fixtures' `.stamp.json` and
 * `.verified.json`, and any `.lora-merge-*` scratch folder.
 *
 * @module
 */

import { join } from "node:path";

/** Copies `from` into `to` (created), recursively, without dot files or folders. */
export async function copyDir(from: string, to: string): Promise<void> {
  await Deno.mkdir(to, { recursive: true });
  for await (const e of Deno.readDir(from)) {
    if (e.name.startsWith(".")) continue;
    if (e.isDirectory) await copyDir(join(from, e.name), join(to, e.name));
    else if (e.isFile) await Deno.copyFile(join(from, e.name), join(to, e.name));
  }
}
