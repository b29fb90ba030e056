/**
 * Writing models.lock entries without reformatting the file: new entries are
 * appended as `[[file]]` tables in the same five-key layout, and an entry
 * whose path is being locked again is cut out line by line. Every other line
 * (comments, provenance notes, other entries) stays byte for byte, so
 * hand-edited and shipped locks stay readable and merge cleanly.
 *
 * @module
 */

import { parse as parseToml } from "smol-toml";
import { checkLockTables, type DerivedEntry, type LockEntry, parseModelsLock } from "./lock.ts";
import { LOCK_CONVERTERS } from "./lock_converters.ts";

/** The TOML of one entry (no `url` line for a local file). */
export function entryToml(e: LockEntry): string {
  const lines = [
    "[[file]]",
    `component = ${JSON.stringify(e.component)}`,
    `path = ${JSON.stringify(e.path)}`,
  ];
  if (e.url !== undefined) lines.push(`url = ${JSON.stringify(e.url)}`);
  lines.push(`size = ${e.size}`, `sha256 = ${JSON.stringify(e.sha256)}`);
  return lines.join("\n") + "\n";
}

/**
 * The TOML of one `[[derived]]` table: its `outputs` are written (relative
 * to `path`) only for a set converter that lists them, with its `options`.
 */
export function derivedToml(
  d: Omit<DerivedEntry, "outputs"> & { outputs?: readonly string[] },
): string {
  const listOutputs = LOCK_CONVERTERS[d.converter]?.outputs([]) === undefined;
  const lines = [
    "[[derived]]",
    `component = ${JSON.stringify(d.component)}`,
    `path = ${JSON.stringify(d.path)}`,
    `converter = ${JSON.stringify(d.converter)}`,
    `from = ${JSON.stringify(d.from)}`,
  ];
  if (d.options !== undefined) lines.push(`options = ${inlineTable(d.options)}`);
  if (listOutputs && d.outputs) {
    lines.push(`outputs = ${JSON.stringify(d.outputs.map((o) => o.slice(d.path.length + 1)))}`);
  }
  return lines.join("\n") + "\n";
}

/** A TOML inline table of plain values (strings, numbers, booleans, arrays of them). */
function inlineTable(o: Record<string, unknown>): string {
  const entries = Object.entries(o).filter(([, v]) => v !== undefined);
  return `{ ${entries.map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join(", ")} }`;
}

/** The first line of the comment above each group that `models add` appends. */
export const ADDED_MARK = "# --- added by `deno task models add`";

const HEADER = `# models.lock — every model file the server may load, pinned (see docs/models.md).
# One [[file]] per file: component, path (relative to the models root), url
# (absent for a local file: verified, never downloaded), size, sha256.
`;

/** A `[[file]]` or `[[derived]]` table in the text: its line range and path. */
interface Block {
  start: number;
  end: number;
  path: string | undefined;
}

function blocks(lines: string[]): Block[] {
  const out: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const head = lines[i].trim();
    if (head !== "[[file]]" && head !== "[[derived]]") continue;
    let end = i + 1;
    while (end < lines.length) {
      const t = lines[end].trim();
      if (t === "" || t.startsWith("#") || t.startsWith("[")) break;
      end++;
    }
    let path: string | undefined;
    try {
      const doc = parseToml(lines.slice(i + 1, end).join("\n")) as Record<string, unknown>;
      if (typeof doc.path === "string") path = doc.path;
    } catch {
      // left as it is; the final parse reports a broken lock
    }
    out.push({ start: i, end, path });
    i = end - 1;
  }
  return out;
}

/**
 * Returns the lock text with the entries for `entries`' paths replaced:
 * old tables of those paths are removed (with an `added by` comment group
 * that is left without entries), the new ones are appended under one
 * comment. The result is parsed before it is returned.
 *
 * @param text current lock text ("" when there is none yet)
 * @param comment extra comment lines after the mark (e.g. the source folder)
 * @throws LockError when the result does not parse (the old text was broken)
 */
export function updateLockText(
  text: string,
  entries: readonly LockEntry[],
  comment: readonly string[],
  source = "models.lock",
  derived: ReadonlyArray<Omit<DerivedEntry, "outputs"> & { outputs?: readonly string[] }> = [],
): { text: string; replaced: number } {
  const paths = new Set([...entries, ...derived].map((e) => e.path));
  const lines = text === "" ? HEADER.split("\n") : text.split("\n");
  const drop = new Set<number>();
  let replaced = 0;
  for (const b of blocks(lines)) {
    if (b.path === undefined || !paths.has(b.path)) continue;
    replaced++;
    for (let i = b.start; i < b.end; i++) drop.add(i);
    // One blank line after the table goes with it.
    if (b.end < lines.length && lines[b.end].trim() === "") drop.add(b.end);
  }
  let kept = lines.filter((_, i) => !drop.has(i));
  kept = dropEmptyAddedGroups(kept);
  while (kept.length > 0 && kept[kept.length - 1].trim() === "") kept.pop();
  const group = [ADDED_MARK, ...comment.map((c) => `# ${c}`)].join("\n");
  const body = [...entries.map(entryToml), ...derived.map(derivedToml)].join("\n");
  const out = `${kept.join("\n")}\n\n${group}\n\n${body}`;
  if (derived.length > 0) checkLockTables(out, source);
  else parseModelsLock(out, source);
  return { text: out, replaced };
}

/** Removes `added by` comment groups that no longer have a table after them. */
function dropEmptyAddedGroups(lines: string[]): string[] {
  const out = [...lines];
  for (let i = out.length - 1; i >= 0; i--) {
    if (!out[i].startsWith(ADDED_MARK)) continue;
    let j = i + 1;
    while (j < out.length && out[j].startsWith("#")) j++;
    let k = j;
    while (k < out.length && out[k].trim() === "") k++;
    if (k >= out.length || out[k].startsWith("#")) out.splice(i, k - i);
  }
  return out;
}

/** Writes a file atomically: a temporary file next to it, then a rename. */
export async function writeAtomically(path: string, text: string): Promise<void> {
  const tmp = `${path}.${crypto.randomUUID()}.tmp`;
  try {
    await Deno.writeTextFile(tmp, text);
    await Deno.rename(tmp, path);
  } catch (e) {
    await Deno.remove(tmp).catch(() => {});
    throw e;
  }
}
