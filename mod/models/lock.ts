/**
 * `models.lock`: the pinned list of every model file the server may load —
 * where it lives under the models root, where it comes from, its size and
 * its sha256. Parsed once, validated strictly (unknown keys are errors), with
 * messages that name the file, the entry, the field and the value.
 *
 * Format (TOML, an array of tables):
 *
 * ```toml
 * [[file]]
 * component = "unet"
 * path = "sd15/unet/model.onnx"
 * url = "https://huggingface.co/<owner>/<repo>/resolve/<40-hex commit>/unet/model.onnx"
 * size = 1234
 * sha256 = "<64 lowercase hex>"
 * ```
 *
 * `url` is optional: an entry without one is a local file (an own export
 * added with `deno task models add`); it is verified, never downloaded.
 *
 * A `[[derived]]` table pins a folder of files that are not downloaded but
 * made on this machine from pinned files by a deterministic converter
 * (`mod/convert`): `from` names its inputs (paths of `[[file]]` entries),
 * `converter` how they become the folder's files. What the converter wrote is
 * recorded beside it and verified like a pinned file (`derived.ts`).
 *
 * ```toml
 * [[derived]]
 * component = "unet"
 * path = "sd15-fp32-derived/unet"
 * converter = "fp32"
 * from = ["sd15/unet/model.onnx", "sd15/unet/weights.pb"]
 * ```
 *
 * Beside the lock, its local overlay `models.local.lock` (same format; git
 * does not track it) holds the user's own entries: `models add` writes
 * there, so updating the checkout never conflicts with them. An overlay
 * entry replaces the lock's entries at its path: a `[[file]]` the lock's
 * file of that path or the derived folder holding it, a `[[derived]]` the
 * lock's derived folder of that path (or one overlapping it) and the files
 * inside it; an overlay's `from` may name the lock's files.
 *
 * @module
 */

import { parse as parseToml } from "smol-toml";
import { localOverlayPath } from "../config/mod.ts";
import { LOCK_CONVERTER_NAMES, LOCK_CONVERTERS } from "./lock_converters.ts";

/**
 * The components outside a base set (ControlNets, preprocessors, LoRA, textual-inversion
 * embeddings): the
 * ones `deno task models add --component` locks one file of.
 */
export const EXTRA_COMPONENTS = [
  "controlnet_depth",
  "controlnet_openpose",
  "controlnet_inpaint",
  "controlnet_unet",
  "depth",
  "pose_detector",
  "pose_estimator",
  "lora",
  "embedding",
] as const;

/** The SD 1.5 base components every configuration needs. */
export const BASE_COMPONENTS = [
  "text_encoder",
  "unet",
  "vae_decoder",
  "vae_encoder",
  "tokenizer",
  "scheduler",
] as const;

/** Every component a lock entry may belong to. */
export const MODEL_COMPONENTS = [...BASE_COMPONENTS, ...EXTRA_COMPONENTS] as const;

/** One of {@link MODEL_COMPONENTS}. */
export type ModelComponent = typeof MODEL_COMPONENTS[number];

/** One pinned file. */
export interface LockEntry {
  /** Which model part the file belongs to. */
  component: ModelComponent;
  /** Path relative to the models root, with "/" separators, no "." or ".." segments. */
  path: string;
  /**
   * Download source: pinned https URL, `http://127.0.0.1…` (tests) or
   * `fixture://…` (built locally); absent for a local file (verified, never downloaded).
   */
  url?: string;
  /** Exact size in bytes. */
  size: number;
  /** sha256 of the content, 64 lowercase hex digits. */
  sha256: string;
}

/** A folder made locally from pinned files (`[[derived]]`). */
export interface DerivedEntry {
  /** The model part its files belong to. */
  component: ModelComponent;
  /** The folder it writes, relative to the models root. */
  path: string;
  /** A converter name of `lock_converters.ts` (`LOCK_CONVERTERS`). */
  converter: string;
  /** Its inputs: paths of `[[file]]` entries of the same lock. */
  from: string[];
  /** The converter's options (set converters: precision, EMA), part of the recipe. */
  options?: Record<string, unknown>;
  /** The paths of the files it writes (`path` + the converter's output names). */
  outputs: string[];
}

/** A whole models.lock: pinned files and derived folders. */
export interface ModelsLock {
  /** `[[file]]` entries. */
  files: LockEntry[];
  /** `[[derived]]` entries. */
  derived: DerivedEntry[];
}

/** A models.lock problem; the message names file, entry, field and value. */
export class LockError extends Error {
  /** Creates an error with a complete message. */
  constructor(message: string) {
    super(message);
    this.name = "LockError";
  }
}

const ENTRY_FIELDS = ["component", "path", "url", "size", "sha256"] as const;
const REQUIRED_FIELDS = ["component", "path", "size", "sha256"] as const;
const HEX40 = /^[0-9a-f]{40}$/;
const SHA256 = /^[0-9a-f]{64}$/;

/** Checks a models-root-relative path; returns a problem or undefined. */
export function relativePathProblem(path: string): string | undefined {
  if (path.length === 0) return "must not be empty";
  if (path.includes("\\")) return 'must use "/" separators';
  if (path.startsWith("/") || /^[A-Za-z]:/.test(path)) return "must be relative to the models root";
  const segments = path.split("/");
  if (segments.some((s) => s === "" || s === "." || s === "..")) {
    return 'must not contain empty, "." or ".." segments';
  }
  if (segments.some((s) => s.endsWith(".partial"))) {
    return 'must not end in ".partial" (reserved for downloads in progress)';
  }
  // deno-lint-ignore no-control-regex
  if (/[\u0000-\u001f]/.test(path)) return "must not contain control characters";
  return undefined;
}

/**
 * Checks a download URL; returns a problem or undefined. Hugging Face URLs
 * must be `/resolve/<40-hex commit>/` so the bytes can never change under
 * the pinned sha256; plain http is only allowed to the loopback host.
 */
export function urlProblem(url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "is not a valid URL";
  }
  if (parsed.protocol === "fixture:") return undefined;
  if (parsed.protocol === "http:") {
    const host = parsed.hostname;
    if (host === "127.0.0.1" || host === "localhost" || host === "[::1]") return undefined;
    return "must be https (plain http is allowed only for 127.0.0.1/localhost)";
  }
  if (parsed.protocol !== "https:") return "must be https, http://127.0.0.1 or fixture://";
  if (parsed.hostname === "huggingface.co") {
    const parts = parsed.pathname.split("/");
    // ["", owner, repo, "resolve", revision, ...file]
    if (parts.length < 6 || parts[3] !== "resolve" || !HEX40.test(parts[4])) {
      return "must be https://huggingface.co/<owner>/<repo>/resolve/<40-hex commit>/<file> (a pinned commit, not a branch)";
    }
  }
  return undefined;
}

/**
 * Parses and validates the text of a models.lock.
 *
 * @param text TOML text
 * @param source file name used in error messages
 * @throws LockError naming the file, entry number (1-based), field and value
 */
export function parseModelsLock(text: string, source = "models.lock"): LockEntry[] {
  return parseLock(text, source).files;
}

/**
 * Parses and validates a whole models.lock: `[[file]]` and `[[derived]]`
 * tables.
 *
 * @throws LockError naming the file, entry number (1-based), field and value
 */
export function parseLock(text: string, source = "models.lock"): ModelsLock {
  return checkLock(parseTables(text, source));
}

/** A `[[derived]]` entry before it is held against the files: with its label for errors. */
interface PendingDerived extends DerivedEntry {
  label: string;
}

/** One lock file's tables, each valid on its own. */
interface LockTables {
  files: LockEntry[];
  derived: PendingDerived[];
}

/** Parses one lock text; the checks between tables are {@link checkLock}'s. */
function parseTables(text: string, source: string): LockTables {
  let doc: Record<string, unknown>;
  try {
    doc = parseToml(text, { integersAsBigInt: "asNeeded" }) as Record<string, unknown>;
  } catch (e) {
    throw new LockError(`${source}: invalid TOML: ${(e as Error).message}`);
  }
  for (const key of Object.keys(doc)) {
    if (key !== "file" && key !== "derived") {
      throw new LockError(
        `${source}: unknown top-level key "${key}" (only [[file]] and [[derived]] tables are allowed)`,
      );
    }
  }
  const entries: LockEntry[] = [];
  const seen = new Map<string, number>();
  for (const { t, label, bad, index } of tables(doc.file, source, "file")) {
    checkTable(t, label, ENTRY_FIELDS, REQUIRED_FIELDS, bad);
    if ("url" in t) {
      if (typeof t.url !== "string") bad("url", "must be a string");
      const badUrl = urlProblem(t.url as string);
      if (badUrl) bad("url", badUrl);
    }
    if (typeof t.size !== "number" || !Number.isSafeInteger(t.size) || t.size < 0) {
      bad("size", "must be a non-negative integer number of bytes");
    }
    if (typeof t.sha256 !== "string" || !SHA256.test(t.sha256)) {
      bad("sha256", "must be 64 lowercase hex digits");
    }
    const path = t.path as string;
    const previous = seen.get(path);
    if (previous !== undefined) {
      throw new LockError(`${label}: path "${path}" is already listed by entry ${previous}`);
    }
    seen.set(path, index);
    entries.push({
      component: t.component as ModelComponent,
      path,
      ...(typeof t.url === "string" ? { url: t.url } : {}),
      size: t.size as number,
      sha256: t.sha256 as string,
    });
  }
  return { files: entries, derived: parseDerived(doc.derived, source) };
}

/** One table of a lock with what its errors say: `label` names file, kind, number and path. */
interface Table {
  t: Record<string, unknown>;
  label: string;
  /** Throws the error for a field: its problem and the value found. */
  bad: (field: string, problem: string) => never;
  /** 1-based. */
  index: number;
}

/** The `[[kind]]` tables of a parsed lock (none when absent). */
function tables(raw: unknown, source: string, kind: "file" | "derived"): Table[] {
  if (raw === undefined) return [];
  if (!Array.isArray(raw)) {
    throw new LockError(`${source}: "${kind}" must be an array of tables written as [[${kind}]]`);
  }
  return raw.map((item: unknown, i: number) => {
    const where = `${source}: [[${kind}]] entry ${i + 1}`;
    if (item === null || typeof item !== "object" || Array.isArray(item)) {
      throw new LockError(`${where} must be a table`);
    }
    const t = item as Record<string, unknown>;
    const label = typeof t.path === "string" ? `${where} (path "${t.path}")` : where;
    const bad = (field: string, problem: string): never => {
      const value = t[field];
      const shown = typeof value === "bigint" ? value.toString() : JSON.stringify(value);
      throw new LockError(`${label}: field "${field}" ${problem}, got ${shown}`);
    };
    return { t, label, bad, index: i + 1 };
  });
}

const DERIVED_FIELDS = ["component", "path", "converter", "from"] as const;
/** Fields of a `[[derived]]` table whose converter takes options and lists its outputs. */
const SET_DERIVED_FIELDS = [...DERIVED_FIELDS, "options", "outputs"] as const;

/**
 * The checks every lock table shares: only `allowed` keys, every `required`
 * one, a known component and a valid root-relative path.
 */
function checkTable(
  t: Record<string, unknown>,
  label: string,
  allowed: readonly string[],
  required: readonly string[],
  bad: (field: string, problem: string) => never,
): void {
  for (const key of Object.keys(t)) {
    if (!allowed.includes(key)) {
      throw new LockError(`${label}: unknown field "${key}" (allowed: ${allowed.join(", ")})`);
    }
  }
  for (const field of required) {
    if (!(field in t)) throw new LockError(`${label}: missing field "${field}"`);
  }
  if (
    typeof t.component !== "string" ||
    !(MODEL_COMPONENTS as readonly string[]).includes(t.component)
  ) {
    bad("component", `must be one of ${MODEL_COMPONENTS.join("|")}`);
  }
  if (typeof t.path !== "string") bad("path", "must be a string");
  const pathProblem = relativePathProblem(t.path as string);
  if (pathProblem) bad("path", pathProblem);
}

/** Validates each `[[derived]]` table on its own (its inputs are {@link checkLock}'s). */
function parseDerived(raw: unknown, source: string): PendingDerived[] {
  return tables(raw, source, "derived").map(({ t, label, bad }) => {
    // A converter whose outputs depend on what it wrote has them listed (with its options).
    const named = typeof t.converter === "string" ? LOCK_CONVERTERS[t.converter] : undefined;
    const listed = named !== undefined && named.outputs([]) === undefined;
    checkTable(t, label, listed ? SET_DERIVED_FIELDS : DERIVED_FIELDS, DERIVED_FIELDS, bad);
    if (typeof t.converter !== "string" || !LOCK_CONVERTER_NAMES.includes(t.converter)) {
      bad("converter", `must be one of ${LOCK_CONVERTER_NAMES.join("|")}`);
    }
    const converter = LOCK_CONVERTERS[t.converter as string];
    const from = t.from as string[];
    const path = t.path as string;
    if (
      !Array.isArray(t.from) || t.from.length === 0 || t.from.some((p) => typeof p !== "string")
    ) {
      bad("from", "must be a non-empty array of [[file]] paths");
    }
    const inputProblem = converter.inputProblem(from);
    if (inputProblem) bad("from", `does not fit converter "${t.converter}": ${inputProblem}`);
    if (
      t.options !== undefined &&
      (t.options === null || typeof t.options !== "object" || Array.isArray(t.options))
    ) bad("options", "must be a table");
    const options = t.options === undefined
      ? undefined
      : { ...(t.options as Record<string, unknown>) };
    const optionsProblem = converter.optionsProblem(options);
    if (optionsProblem) bad("options", optionsProblem);
    let names = converter.outputs(from);
    if (names === undefined) {
      const o = t.outputs;
      if (
        !Array.isArray(o) || o.length === 0 ||
        o.some((n) => typeof n !== "string" || relativePathProblem(n) !== undefined)
      ) {
        bad("outputs", "must list the file names the converter wrote, relative to path");
      }
      names = o as string[];
    }
    return {
      label,
      component: t.component as ModelComponent,
      path,
      converter: t.converter as string,
      from,
      ...(options !== undefined ? { options } : {}),
      outputs: names.map((name) => `${path}/${name}`),
    };
  });
}

/** Whether `path` is `folder` or lies inside it. */
function within(path: string, folder: string): boolean {
  return path === folder || path.startsWith(`${folder}/`);
}

/**
 * Holds the `[[derived]]` entries against the files (a lock with its overlay
 * over it, or one lock alone): each input is a `[[file]]`, no file lies in
 * a derived folder, no two derived folders overlap.
 */
function checkLock(tables: LockTables): ModelsLock {
  const filePaths = new Set(tables.files.map((f) => f.path));
  const derived: DerivedEntry[] = [];
  for (const { label, ...d } of tables.derived) {
    for (const p of d.from) {
      if (!filePaths.has(p)) {
        throw new LockError(
          `${label}: field "from" must name [[file]] paths of this lock ("${p}" is not one), ` +
            `got ${JSON.stringify(d.from)}`,
        );
      }
    }
    for (const f of filePaths) {
      if (f.startsWith(`${d.path}/`)) {
        throw new LockError(`${label}: the [[file]] "${f}" lies inside this derived folder`);
      }
    }
    for (const other of derived) {
      if (within(other.path, d.path) || within(d.path, other.path)) {
        throw new LockError(`${label}: overlaps the derived folder "${other.path}"`);
      }
    }
    derived.push(d);
  }
  return { files: tables.files, derived };
}

/** The text of a lock file; null when it does not exist. */
async function readLockText(path: string): Promise<string | null> {
  try {
    return await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw new LockError(`cannot read ${path}: ${(e as Error).message}`);
  }
}

/** `lock` with `overlay` over it: an overlay entry replaces the one of the same path. */
export function overlayLockEntries(
  lock: readonly LockEntry[],
  overlay: readonly LockEntry[],
): LockEntry[] {
  const replaced = new Set(overlay.map((e) => e.path));
  return [...lock.filter((e) => !replaced.has(e.path)), ...overlay];
}

/** `lock`'s tables with `overlay`'s over them (see the module documentation). */
function overlayTables(lock: LockTables, overlay: LockTables): LockTables {
  const folders = overlay.derived.map((d) => d.path);
  const files = overlayLockEntries(
    lock.files.filter((f) => !folders.some((folder) => within(f.path, folder))),
    overlay.files,
  );
  const derived = lock.derived.filter((d) =>
    !overlay.files.some((f) => within(f.path, d.path)) &&
    !folders.some((folder) => within(folder, d.path) || within(d.path, folder))
  );
  return { files, derived: [...derived, ...overlay.derived] };
}

/**
 * Reads and validates a whole models.lock (`[[file]]` and `[[derived]]`)
 * and, when it exists, its local overlay (`models.local.lock` beside it,
 * read over it as the module documentation says).
 *
 * @throws LockError when neither file exists, or one is unreadable or invalid
 */
export async function readLock(path: string): Promise<ModelsLock> {
  const overlayPath = localOverlayPath(path);
  const [text, local] = [await readLockText(path), await readLockText(overlayPath)];
  if (text === null && local === null) {
    throw new LockError(`cannot read ${path}: the file does not exist`);
  }
  return lockWithOverlay(text, local, path);
}

/**
 * A models.lock's text with its overlay's text over it, validated as
 * {@link readLock} validates the files (null: that file does not exist).
 *
 * @throws LockError when one is invalid
 */
export function lockWithOverlay(
  text: string | null,
  local: string | null,
  path: string,
): ModelsLock {
  const tables = text === null ? { files: [], derived: [] } : parseTables(text, path);
  return checkLock(
    local === null ? tables : overlayTables(tables, parseTables(local, localOverlayPath(path))),
  );
}

/**
 * Validates each table of a lock text on its own (an overlay's `from` may
 * name the lock's files, so they are not held against each other here).
 *
 * @throws LockError naming the file, entry, field and value
 */
export function checkLockTables(text: string, source: string): void {
  parseTables(text, source);
}

/**
 * The `[[file]]` entries of a models.lock and its local overlay (see
 * {@link readLock}).
 *
 * @throws LockError when neither file exists, or one is unreadable or invalid
 */
export async function readModelsLock(path: string): Promise<LockEntry[]> {
  return (await readLock(path)).files;
}

/** Keeps the entries of the given components (all entries when `only` is empty). */
export function selectComponents(
  entries: readonly LockEntry[],
  only: readonly ModelComponent[],
): LockEntry[] {
  return only.length === 0 ? [...entries] : entries.filter((e) => only.includes(e.component));
}

/**
 * Parses a comma-separated component list (`--only unet,vae_decoder`).
 *
 * @throws LockError naming the unknown component
 */
export function parseComponentList(list: string): ModelComponent[] {
  const names = list.split(",").map((s) => s.trim()).filter((s) => s.length > 0);
  for (const name of names) {
    if (!(MODEL_COMPONENTS as readonly string[]).includes(name)) {
      throw new LockError(
        `unknown component "${name}" (known: ${MODEL_COMPONENTS.join(", ")})`,
      );
    }
  }
  return names as ModelComponent[];
}
