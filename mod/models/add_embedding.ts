/**
 * The `[prompt] embeddings` edit of `deno task models add --component embedding`: what the
 * user wrote (config.toml with its config.local.toml over it) plus the new file, each entry
 * as written, so a configured name stays with its file.
 *
 * @module
 */

import { isAbsolute, join } from "node:path";
import { type ConfigEdit, readWrittenConfig } from "../config/mod.ts";
import { tomlString } from "./add.ts";
import { toLockPath } from "./required.ts";

/** One written entry: a path, or `{ path, name }`. */
type WrittenEmbedding = string | { path: string; name?: string };

/**
 * The edit that lists `added` (a lock path under `root`) in `[prompt] embeddings`; an entry
 * already naming that file stays as it is.
 */
export async function embeddingsEdit(
  configPath: string | undefined,
  root: string,
  added: string,
): Promise<ConfigEdit> {
  const written = await readWrittenConfig(configPath);
  const list = (written.prompt as { embeddings?: unknown } | undefined)?.embeddings;
  const own: WrittenEmbedding[] = Array.isArray(list) ? list as WrittenEmbedding[] : [];
  const pathOf = (e: WrittenEmbedding) => typeof e === "string" ? e : e.path;
  // Written paths are relative to the models root (or absolute); compare them as lock paths.
  const key = (p: string) => toLockPath(isAbsolute(p) ? p : join(root, p), root);
  const entries = own.some((e) => key(pathOf(e)) === added) ? own : [...own, added];
  const value = `[${
    entries.map((e) =>
      typeof e === "string"
        ? tomlString(e)
        : `{ path = ${tomlString(e.path)}${
          e.name === undefined ? "" : `, name = ${tomlString(e.name)}`
        } }`
    ).join(", ")
  }]`;
  return { section: "prompt", key: "embeddings", value };
}
