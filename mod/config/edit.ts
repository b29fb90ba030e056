/**
 * Sets keys in `config.toml` text without reformatting it (`deno task models
 * add --write-config`): an existing `key = value` line keeps its indentation
 * and trailing comment and gets the new value; a missing key is added at the
 * end of its section; a missing section is appended. The result is parsed and
 * each value read back before it is returned, so a file this cannot edit
 * safely (a multi-line value, a key set in another form) is refused, not
 * broken. {@link readWrittenConfig} gives what the user wrote (the file and
 * its local overlay, before defaults and presets), the base an edit of a list
 * such as `[lora] files` must start from.
 *
 * @module
 */

import { parse as parseToml } from "smol-toml";
import { localOverlayPath, mergeTables } from "./overlay.ts";

/** One key to set: `[section] key = value`, the value as TOML text. */
export interface ConfigEdit {
  /** Table name, e.g. `models` or `controlnet.depth`. */
  section: string;
  /** Key inside the table. */
  key: string;
  /** The value as TOML (e.g. `"sd15-fp32"`, `[{ path = "lora/x.safetensors", weight = 1.0 }]`). */
  value: string;
}

/** A config file this cannot edit safely; the message says why. */
export class ConfigEditError extends Error {
  /** Creates the error with a complete message. */
  constructor(message: string) {
    super(message);
    this.name = "ConfigEditError";
  }
}

const HEADER = /^\s*\[([A-Za-z0-9_.\- ]+)\]\s*(#.*)?$/;

/** Index just past a TOML value that starts at `i` on a single line; -1 when it does not end there. */
function valueEnd(line: string, i: number): number {
  let depth = 0;
  let j = i;
  while (j < line.length) {
    const c = line[j];
    if (c === '"' || c === "'") {
      const triple = line.startsWith(c.repeat(3), j);
      if (triple) return -1;
      j++;
      while (j < line.length && line[j] !== c) j += c === '"' && line[j] === "\\" ? 2 : 1;
      if (j >= line.length) return -1;
      j++;
      if (depth === 0) return j;
      continue;
    }
    if (c === "[" || c === "{") depth++;
    else if (c === "]" || c === "}") {
      depth--;
      if (depth === 0) return j + 1;
    } else if (depth === 0 && (c === "#" || /\s/.test(c))) return j;
    j++;
  }
  return depth === 0 ? j : -1;
}

function valueAt(doc: unknown, section: string, key: string): unknown {
  let node = doc;
  for (const part of [...section.split("."), key]) {
    if (node === null || typeof node !== "object") return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

/**
 * Applies `edits` to config text ("" for a new file).
 *
 * @throws ConfigEditError when the text is not valid TOML, a value spans
 *   several lines, or the edited file does not read back the new values
 */
export function editConfigText(text: string, edits: readonly ConfigEdit[]): string {
  try {
    parseToml(text);
  } catch (e) {
    throw new ConfigEditError(`the config is not valid TOML: ${(e as Error).message}`);
  }
  const lines = text === "" ? [] : text.split("\n");
  for (const edit of edits) {
    const start = lines.findIndex((l) => HEADER.exec(l)?.[1].trim() === edit.section);
    if (start < 0) {
      while (lines.length > 0 && lines[lines.length - 1].trim() === "") lines.pop();
      if (lines.length > 0) lines.push("");
      lines.push(`[${edit.section}]`, `${edit.key} = ${edit.value}`, "");
      continue;
    }
    let end = start + 1;
    while (end < lines.length && !HEADER.test(lines[end]) && !/^\s*\[\[/.test(lines[end])) end++;
    const keyLine = new RegExp(
      `^(\\s*${edit.key.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\s*=\\s*)`,
    );
    let found = false;
    for (let i = start + 1; i < end; i++) {
      const m = keyLine.exec(lines[i]);
      if (!m) continue;
      const after = valueEnd(lines[i], m[1].length);
      if (after < 0) {
        throw new ConfigEditError(
          `[${edit.section}] ${edit.key} spans several lines; set it by hand to ${edit.value}`,
        );
      }
      lines[i] = m[1] + edit.value + lines[i].slice(after);
      found = true;
      break;
    }
    if (!found) {
      let at = end;
      while (at > start + 1 && lines[at - 1].trim() === "") at--;
      lines.splice(at, 0, `${edit.key} = ${edit.value}`);
    }
  }
  const out = lines.join("\n").replace(/\n*$/, "\n");
  let doc: unknown;
  try {
    doc = parseToml(out);
  } catch (e) {
    throw new ConfigEditError(`editing the config would break it: ${(e as Error).message}`);
  }
  for (const edit of edits) {
    const want = (parseToml(`v = ${edit.value}`) as { v: unknown }).v;
    const got = valueAt(doc, edit.section, edit.key);
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      throw new ConfigEditError(
        `[${edit.section}] ${edit.key} could not be set in place (it is written in another form); ` +
          `set it by hand to ${edit.value}`,
      );
    }
  }
  return out;
}

/** Parsed TOML of `path`; an empty table when the file does not exist. */
async function readTomlOrEmpty(path: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return {};
    throw new ConfigEditError(`cannot read ${path}: ${(e as Error).message}`);
  }
  try {
    return parseToml(text) as Record<string, unknown>;
  } catch (e) {
    throw new ConfigEditError(`${path} is not valid TOML: ${(e as Error).message}`);
  }
}

/**
 * What the user wrote: the config file at `path` with its local overlay
 * (`<name>.local.toml`) laid over it, as parsed TOML — no defaults, no
 * preset's additions (the fast preset appends its LCM LoRA to the resolved
 * `[lora] files`, never to this). An edit that extends a list starts from
 * here, so it writes back only what the user wrote plus the new entry.
 * Empty when `path` is undefined (no config file: the defaults).
 *
 * @throws ConfigEditError when a file cannot be read or is not valid TOML
 */
export async function readWrittenConfig(
  path: string | undefined,
): Promise<Record<string, unknown>> {
  if (path === undefined) return {};
  return mergeTables(await readTomlOrEmpty(path), await readTomlOrEmpty(localOverlayPath(path)));
}
