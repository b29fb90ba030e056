/**
 * A LoRA listed twice in the resolved `[lora] files` would be merged twice:
 * its update added two times, which is the same as doubling its weight (the
 * LCM LoRA at weight 2 breaks every image, silently). The resolved list is
 * the user's `[lora] files` followed by what the preset adds (the fast
 * preset: `[models] lcm_lora`; turbo: `[models] turbo_lora`), so a repeat comes from the user listing a
 * file twice, listing the preset's own LoRA, or listing two paths that are
 * the same LoRA.
 *
 * Two entries are the same LoRA when they name the same path, the same file
 * (a symbolic or hard link: same device and inode) or the same content (the
 * same sha256 in models.lock: a copy pinned under two paths). The check
 * works on the resolved list alone, so it covers any preset's additions.
 *
 * Such a configuration is refused, naming each repeat, rather than one entry
 * being dropped: the two entries may carry different weights, and which one
 * was meant only the user knows. The message says what to remove.
 *
 * @module
 */

import { isAbsolute, relative } from "node:path";
import { LoraError } from "./lora_set.ts";

/** One entry of the resolved LoRA list. */
export interface LoraListEntry {
  /** Absolute path of the `.safetensors` file. */
  readonly path: string;
  /** Its weight (shown in the message; 1.0 when absent). */
  readonly weight?: number;
}

/** What tells the files of two entries apart, besides their paths. */
export interface LoraIdentity {
  /** The file behind the path (`device:inode`), when it exists. */
  file?: string;
  /** Its content's sha256 as pinned in models.lock, when locked. */
  sha256?: string;
}

/** Entries of the list that are one LoRA, and why. */
export interface RepeatedLora {
  /** Indexes into the list, ascending (two or more). */
  indexes: number[];
  /** "the same path", "the same file" or "the same content (sha256 …)". */
  why: string;
}

/** A LoRA listed more than once; the message names each repeat and the fix. */
export class RepeatedLoraError extends LoraError {
  /** The repeats found. */
  readonly repeats: readonly RepeatedLora[];

  /** Creates the error with a complete message. */
  constructor(message: string, repeats: readonly RepeatedLora[]) {
    super(message);
    this.name = "RepeatedLoraError";
    this.repeats = repeats;
  }
}

/**
 * The groups of entries that are the same LoRA (by path, file or content;
 * the relation is followed through: A = B by path and B = C by content puts
 * A, B and C in one group). Empty when every LoRA is listed once.
 *
 * @param identities one per entry, in the same order (missing fields are unknown)
 */
export function findRepeatedLoras(
  files: readonly LoraListEntry[],
  identities: readonly LoraIdentity[],
): RepeatedLora[] {
  const parent = files.map((_, i) => i);
  const find = (i: number): number => (parent[i] === i ? i : (parent[i] = find(parent[i])));
  const reasons = new Map<number, Set<string>>();
  const join = (a: number, b: number, why: string) => {
    const ra = find(a);
    const rb = find(b);
    const root = Math.min(ra, rb);
    const merged = new Set([...(reasons.get(ra) ?? []), ...(reasons.get(rb) ?? []), why]);
    parent[ra] = root;
    parent[rb] = root;
    reasons.delete(ra);
    reasons.delete(rb);
    reasons.set(root, merged);
  };
  /** Joins the entries whose `keyOf` is equal (undefined: unknown, joins nothing). */
  const byKey = (keyOf: (i: number) => string | undefined, why: (k: string) => string) => {
    const first = new Map<string, number>();
    files.forEach((_, i) => {
      const k = keyOf(i);
      if (k === undefined) return;
      const seen = first.get(k);
      if (seen === undefined) first.set(k, i);
      else join(seen, i, why(k));
    });
  };
  byKey((i) => files[i].path, () => "the same path");
  byKey((i) => identities[i]?.file, () => "the same file");
  byKey((i) => identities[i]?.sha256, (k) => `the same content (sha256 ${k.slice(0, 12)}…)`);
  const groups = new Map<number, number[]>();
  files.forEach((_, i) => {
    const r = find(i);
    groups.set(r, [...(groups.get(r) ?? []), i]);
  });
  return [...groups].filter(([, g]) => g.length > 1).map(([r, indexes]) => ({
    indexes,
    why: [...(reasons.get(r) ?? [])].join(", "),
  }));
}

/** The file behind `path` as `device:inode` (links resolved), or undefined when it cannot be read. */
export async function fileIdentity(path: string): Promise<string | undefined> {
  try {
    const s = await Deno.stat(path);
    return s.ino === null ? undefined : `${s.dev}:${s.ino}`;
  } catch {
    return undefined;
  }
}

/** Options of {@link assertLorasListedOnce}. */
export interface ListedOnceOptions {
  /** The sha256 pinned for a LoRA's absolute path (models.lock), when it is locked. */
  sha256Of?: (path: string) => string | undefined;
  /** The models root: paths in the message are shown relative to it. */
  root?: string;
}

/**
 * Refuses a resolved LoRA list that names one LoRA more than once (by path,
 * by file, or by pinned content).
 *
 * @throws RepeatedLoraError naming every repeat (its paths, positions and
 *   weights, and why they are one LoRA) and what to remove
 */
export async function assertLorasListedOnce(
  files: readonly LoraListEntry[],
  options: ListedOnceOptions = {},
): Promise<void> {
  if (files.length < 2) return;
  const identities = await Promise.all(files.map(async (f) => ({
    file: await fileIdentity(f.path),
    sha256: options.sha256Of?.(f.path),
  })));
  const repeats = findRepeatedLoras(files, identities);
  if (repeats.length === 0) return;
  const shown = (path: string) => {
    if (options.root === undefined) return path;
    const rel = relative(options.root, path);
    return rel.startsWith("..") || isAbsolute(rel) ? path : rel;
  };
  const lines = repeats.map(({ indexes, why }) => {
    const entries = indexes.map((i) =>
      `${shown(files[i].path)} (entry ${i + 1} of ${files.length}, weight ${files[i].weight ?? 1})`
    );
    const total = indexes.reduce((sum, i) => sum + (files[i].weight ?? 1), 0);
    return `${entries.join(" and ")}: ${why}; it would be merged ${indexes.length} times ` +
      `(weights adding up to ${total})`;
  });
  throw new RepeatedLoraError(
    `a LoRA is listed more than once in the LoRAs to merge ([lora] files, then the LoRA ` +
      `the preset merges by itself, if any):\n${lines.map((l) => `  ${l}`).join("\n")}\n` +
      "List each LoRA once: remove the repeat from [lora] files (config.toml, or the " +
      "config.local.toml beside it). A preset that merges a LoRA of its own adds it after " +
      "[lora] files (fast: the LCM LoRA, [models] lcm_lora; turbo: Hyper-SD's, " +
      "[models] turbo_lora): leave it out of them, or set " +
      '[generation] preset = "custom" to choose every LoRA and its weight yourself.',
    repeats,
  );
}
