/**
 * The `[prompt]` and `[lora]` parts of the resolved config: how prompts are
 * read, the textual-inversion embeddings with the word that calls each, and
 * the LoRA files blended in at start-up.
 *
 * @module
 */

import { isAbsolute, resolve } from "node:path";
import { ConfigError } from "./error.ts";
import type { RawConfig } from "./schema.ts";

/** How prompts are read (`[prompt] syntax`). */
export type PromptSyntax = "a1111" | "plain";

/**
 * `[prompt] embeddings`: absolute paths and the word of each (the name, else the file's stem, as
 * AUTOMATIC1111 names an embedding).
 *
 * @throws ConfigError when two embeddings are called by the same word
 */
export function resolveEmbeddings(
  entries: RawConfig["prompt"]["embeddings"],
  root: string,
  where: string,
): { path: string; name: string }[] {
  const out: { path: string; name: string }[] = [];
  for (const entry of entries) {
    const { path, name } = typeof entry === "string" ? { path: entry, name: undefined } : entry;
    const file = path.split(/[\\/]/).pop()!;
    const word = name ?? file.slice(0, file.lastIndexOf("."));
    const other = out.find((e) => e.name === word);
    if (other !== undefined) {
      throw new ConfigError(
        `${where}: [prompt] embeddings calls two files "${word}" (${other.path} and ${path}); ` +
          `give one of them another name: { path = ${JSON.stringify(path)}, name = "…" }`,
      );
    }
    out.push({ path: isAbsolute(path) ? path : resolve(root, path), name: word });
  }
  return out;
}

/**
 * `[lora] files` as absolute paths under the models root, in config order,
 * then the preset's distillation LoRA (weight 1) when it has one.
 */
export function resolveLoraFiles(
  files: RawConfig["lora"]["files"],
  root: string,
  presetLoraPath: string | undefined,
): { path: string; weight: number }[] {
  return [
    ...files.map((f) => ({
      path: isAbsolute(f.path) ? f.path : resolve(root, f.path),
      weight: f.weight,
    })),
    ...(presetLoraPath ? [{ path: presetLoraPath, weight: 1 }] : []),
  ];
}
