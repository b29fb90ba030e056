/**
 * The check of exactly the files a configuration needs (see
 * {@link neededFiles}): each one ok, not locked, missing, of the wrong size or
 * with the wrong hash, with advice that fits the entry — download it (an
 * entry with a `url`), build it (`fixture://`), or put it back / lock it again
 * with `deno task models add` (a local entry, which is never downloaded).
 * Shared by start-up, `deno task models check` and `deno task models`.
 *
 * @module
 */

import { LOCK_CONVERTERS } from "./lock_converters.ts";
import type { DerivedCheck } from "./derived.ts";
import { checkLockDerived } from "./derived_lock.ts";
import { type DerivedEntry, readLock } from "./lock.ts";
import type { ProgressOptions } from "./progress.ts";
import { type ModelPathsConfig, type NeededFile, neededFiles, toLockPath } from "./required.ts";
import { checkModelFiles, ModelFilesError, type VerifyProblem } from "./verify.ts";

/** The state of one needed file. */
export type FileState =
  | "ok"
  | "not locked"
  | "missing"
  | "wrong size"
  | "wrong hash"
  | "not a file"
  | "unreadable"
  | "not built"
  | "stale";

/** One needed file and what was found. */
export interface FileCheck extends NeededFile {
  /** What was found. */
  state: FileState;
  /** For a problem: what is wrong and what to do, in one line. */
  detail?: string;
}

/** The model part of a resolved config plus the lock path. */
export interface CheckedConfig extends ModelPathsConfig {
  /** Models root, base, ControlNet UNet and the absolute path of the lock. */
  models: ModelPathsConfig["models"] & { lock: string };
}

/** Result of {@link checkConfiguredFiles}. */
export interface ConfigCheck {
  /** One row per needed file, in config order. */
  files: FileCheck[];
  /** Configured paths outside the models root. */
  outside: string[];
  /** Paths hashed this time (the rest came from the size + mtime cache). */
  hashed: string[];
  /**
   * Each needed `[[derived]]` folder: whether its inputs are all ok (so it can
   * be built), and the state of what is there.
   */
  derived: Array<{ entry: DerivedEntry; inputsOk: boolean; check: DerivedCheck }>;
}

const KEY_COMPONENT: Record<string, string> = {
  "[models] controlnet_unet": "controlnet_unet",
  "[controlnet.depth] model": "controlnet_depth",
  "[controlnet.depth] preprocessor": "depth",
  "[controlnet.openpose] model": "controlnet_openpose",
  "[controlnet.openpose] detector": "pose_detector",
  "[controlnet.openpose] estimator": "pose_estimator",
  "[controlnet.inpaint] model": "controlnet_inpaint",
  "[lora] files": "lora",
  "[prompt] embeddings": "embedding",
};

/** The `models add` command that locks what is at a needed file's place. */
export function addCommand(file: NeededFile, root: string): string {
  const keyName = file.key.slice(0, file.key.indexOf(" =")).trim();
  if (keyName === "[models] base") {
    const value = JSON.parse(file.key.slice(file.key.indexOf("=") + 1).trim()) as string;
    return `deno task models add ${shellWord(pathForCommand(value, root))}`;
  }
  const component = KEY_COMPONENT[keyName] ?? file.entry?.component ?? "COMPONENT";
  return `deno task models add --component ${component} ${
    shellWord(pathForCommand(file.path, root))
  }`;
}

/** A root-relative path as the user would type it from the current folder. */
function pathForCommand(rel: string, root: string): string {
  const abs = `${root}/${rel}`;
  const fromCwd = toLockPath(abs, Deno.cwd());
  return fromCwd.startsWith("../") ? abs : fromCwd;
}

function shellWord(s: string): string {
  return /^[A-Za-z0-9_./:@%+=,-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`;
}

function advice(file: NeededFile, state: FileState, root: string, lock: string): string {
  if (file.derived) {
    const d = file.derived;
    return `made here from ${d.from.join(", ")} (${LOCK_CONVERTERS[d.converter].describe}): run ` +
      "`deno task models` to build it (the server also builds it at start-up once its inputs " +
      "are in place)";
  }
  const url = file.entry?.url;
  if (state === "not locked") return `lock what is there with \`${addCommand(file, root)}\``;
  if (url?.startsWith("fixture:")) return "run `deno task fixtures` to build it";
  if (url !== undefined) {
    return state === "missing"
      ? "run `deno task models` to download it"
      : "run `deno task models` to download it again";
  }
  const local = `a local file (no url in ${lock})`;
  return state === "missing"
    ? `${local}: put it back there, or lock what is there with \`${addCommand(file, root)}\``
    : `${local} that changed since it was locked: restore it, or lock the new bytes with ` +
      `\`${addCommand(file, root)}\``;
}

const KIND_STATE: Record<VerifyProblem["kind"], FileState> = {
  missing: "missing",
  not_a_file: "not a file",
  size: "wrong size",
  sha256: "wrong hash",
  unreadable: "unreadable",
};

/**
 * Checks every file the configuration needs against the lock (sizes always,
 * sha256 only for files whose size or mtime changed since they were hashed).
 *
 * @throws LockError when the lock cannot be read or is invalid
 */
export async function checkConfiguredFiles(
  config: CheckedConfig,
  options: { progress?: ProgressOptions | false } = {},
): Promise<ConfigCheck> {
  const root = config.models.root;
  const lock = config.models.lock;
  const { files: entries, derived: derivedEntries } = await readLock(lock);
  const needed = neededFiles(config, entries, derivedEntries);
  const locked = needed.files.flatMap((f) => f.entry ? [f.entry] : []);
  const result = await checkModelFiles({ root, entries: locked, progress: options.progress });
  const problems = new Map(result.problems.map((p) => [p.path, p]));
  const derived: ConfigCheck["derived"] = [];
  for (const entry of needed.derived) {
    const bad = entry.from.filter((p) => problems.has(p));
    const check: DerivedCheck = bad.length > 0
      ? {
        ok: false,
        problem: "not built",
        detail: `its inputs are not in place (${bad.join(", ")})`,
      }
      : await checkLockDerived(root, entry, entries);
    if (check.ok) result.hashed.push(...check.hashed.map((n) => `${entry.path}/${n}`));
    derived.push({ entry, inputsOk: bad.length === 0, check });
  }
  const derivedState = new Map(derived.map((d) => [d.entry, d.check]));
  const files = needed.files.map((f): FileCheck => {
    if (f.derived) {
      const c = derivedState.get(f.derived)!;
      if (c.ok) return { ...f, state: "ok" };
      return { ...f, state: c.problem, detail: `${c.detail}; ${advice(f, c.problem, root, lock)}` };
    }
    if (!f.entry) {
      return {
        ...f,
        state: "not locked",
        detail: `not in ${lock}; ${advice(f, "not locked", root, lock)}`,
      };
    }
    const p = problems.get(f.path);
    if (!p) return { ...f, state: "ok" };
    const state = KIND_STATE[p.kind];
    const what = p.message.slice(f.path.length + 2);
    const where = state === "missing" ? `; expected at ${f.abs}` : "";
    return { ...f, state, detail: `${what}${where}; ${advice(f, state, root, lock)}` };
  });
  return { files, outside: needed.outside, hashed: result.hashed, derived };
}

/**
 * Start-up: throws a {@link ModelFilesError} when any needed file is not ok
 * (except derived files that can be built: their inputs are ok); each line
 * names the file, what is wrong, the config key that needs it and the fix.
 * Returns the check (its `derived` says which folders to build).
 */
export async function assertConfiguredFiles(config: CheckedConfig): Promise<ConfigCheck> {
  const check = await checkConfiguredFiles(config);
  // A derived file whose inputs are in place is not a problem: start-up builds it.
  const buildable = new Set(check.derived.filter((d) => d.inputsOk).map((d) => d.entry));
  const bad = check.files.filter((f) =>
    f.state !== "ok" && !(f.derived && buildable.has(f.derived))
  );
  if (bad.length === 0 && check.outside.length === 0) return check;
  const lines = [
    ...check.outside,
    ...bad.map((f) => `${f.path} (${f.key}): ${f.detail}`),
  ];
  const problems: VerifyProblem[] = bad.map((f) => ({
    path: f.path,
    kind: f.state === "wrong hash"
      ? "sha256"
      : f.state === "wrong size"
      ? "size"
      : f.state === "not a file"
      ? "not_a_file"
      : f.state === "unreadable"
      ? "unreadable"
      : "missing",
    message: `${f.path}: ${f.detail}`,
  }));
  const root = config.models.root;
  throw new ModelFilesError(
    root,
    problems,
    `model files this configuration needs are not in place (models root ${root}, lock ` +
      `${config.models.lock}):\n` + lines.map((l) => `  ${l}`).join("\n"),
  );
}
