/**
 * Where `deno compile` gets the Deno runtime it embeds (`denort`), decided
 * before compiling so that a missing runtime fails in one line instead of a
 * download error with a stack trace.
 *
 * `deno compile` takes, in order (Deno 2.x, cli/standalone/binary.rs):
 * 1. the file named by `DENORT_BIN` (an unzipped `denort` of the same Deno
 *    version and target; checked to be an executable that is not the deno
 *    CLI before anything is compiled);
 * 2. the cached zip `<DENO_DIR>/dl/release/v<version>/denort-<target>.zip`;
 * 3. a download of that zip from `https://dl.deno.land/release/v<version>/`
 *    into the cache.
 *
 * @module
 */

/** How the runtime will be obtained. */
export type RuntimeSource =
  | { kind: "env"; path: string }
  | { kind: "cache"; path: string }
  | { kind: "download"; url: string; cachePath: string };

/** What the lookup needs from the environment (injected in tests). */
export interface RuntimeLookup {
  /** The value of `DENORT_BIN`, if set. */
  denortBin?: string;
  /** Deno's cache folder (`denoDir` of `deno info --json`). */
  denoDir: string;
  /** The Deno version compiling (`Deno.version.deno`). */
  version: string;
  /** The target triple (`Deno.build.target`). */
  target: string;
  /** The first bytes of a file, or null when it does not exist or is not a file. */
  head(path: string): Promise<Uint8Array | null>;
  /** Whether a URL answers at all (any HTTP status); false on a network error or timeout. */
  reachable(url: string): Promise<boolean>;
  /**
   * Runs `path --version` (bounded in time) and returns its exit status and
   * first line of output; `code` is null when it did not end in time.
   */
  probe(path: string): Promise<{ code: number | null; firstLine: string }>;
}

/** A runtime that cannot be used, with the one line that says what to do. */
export class RuntimeMissing extends Error {}

/** The zip's file name for a target, as dl.deno.land and the GitHub releases name it. */
export function denortZipName(target: string): string {
  return `denort-${target}.zip`;
}

/** Where `deno compile` looks for the cached zip. */
export function cachedZipPath(denoDir: string, version: string, target: string): string {
  return `${denoDir}/dl/release/v${version}/${denortZipName(target)}`;
}

/** The URL `deno compile` downloads the zip from. */
export function downloadUrl(version: string, target: string): string {
  return `https://dl.deno.land/release/v${version}/${denortZipName(target)}`;
}

const ZIP_MAGIC = [0x50, 0x4b, 0x03, 0x04]; // "PK\3\4", a local file header (APPNOTE 4.3.7)
const ELF_MAGIC = [0x7f, 0x45, 0x4c, 0x46];
const MACHO_MAGICS = [[0xcf, 0xfa, 0xed, 0xfe], [0xca, 0xfe, 0xba, 0xbe]];
const PE_MAGIC = [0x4d, 0x5a]; // "MZ"

function startsWith(bytes: Uint8Array, magic: number[]): boolean {
  return magic.every((b, i) => bytes[i] === b);
}

function isExecutable(bytes: Uint8Array): boolean {
  return startsWith(bytes, ELF_MAGIC) || MACHO_MAGICS.some((m) => startsWith(bytes, m)) ||
    startsWith(bytes, PE_MAGIC);
}

/** The how-to part of every failure line. */
export function howToProvide(version: string, target: string, cachePath: string): string {
  const zip = denortZipName(target);
  return `get ${zip} for Deno ${version} (https://dl.deno.land/release/v${version}/${zip}, ` +
    `or the v${version} assets of github.com/denoland/deno/releases) on a machine that can, ` +
    `then either unzip it and set DENORT_BIN=/path/to/denort, or put the zip at ${cachePath}`;
}

/**
 * Decides where the runtime comes from, checking that it is there.
 *
 * @throws RuntimeMissing with a one-line message naming what is missing and how to provide it
 */
export async function locateRuntime(lookup: RuntimeLookup): Promise<RuntimeSource> {
  const cachePath = cachedZipPath(lookup.denoDir, lookup.version, lookup.target);
  const how = howToProvide(lookup.version, lookup.target, cachePath);
  if (lookup.denortBin !== undefined && lookup.denortBin !== "") {
    const head = await lookup.head(lookup.denortBin);
    if (head === null) {
      throw new RuntimeMissing(`DENORT_BIN=${lookup.denortBin} is not a file; ${how}`);
    }
    if (!isExecutable(head)) {
      throw new RuntimeMissing(
        `DENORT_BIN=${lookup.denortBin} is not an executable (no ELF, Mach-O or PE header; ` +
          `a zip must be unzipped first); ${how}`,
      );
    }
    // denort runs only the program compiled into it: on its own it answers any argument with
    // "error: Could not find standalone binary section." and exit 1 (Deno 2.x,
    // cli/rt/binary.rs). The deno CLI answers --version with exit 0 and "deno <version> …".
    // Asking costs milliseconds; compiling with the wrong runtime costs a minute.
    const probe = await lookup.probe(lookup.denortBin);
    if (probe.code === null || probe.code === 0) {
      const answer = probe.code === null
        ? "did not answer `--version` within 10 s"
        : `answers \`--version\` (exit 0, "${probe.firstLine}")`;
      const cli = /^deno \d/.test(probe.firstLine) ? ", as the deno CLI does" : "";
      throw new RuntimeMissing(
        `DENORT_BIN=${lookup.denortBin} is not denort: it ${answer}${cli}, while denort refuses ` +
          `to run without a compiled program; ${how}`,
      );
    }
    return { kind: "env", path: lookup.denortBin };
  }
  const cached = await lookup.head(cachePath);
  if (cached !== null) {
    if (!startsWith(cached, ZIP_MAGIC)) {
      throw new RuntimeMissing(`the cached runtime ${cachePath} is not a zip file; ${how}`);
    }
    return { kind: "cache", path: cachePath };
  }
  const url = downloadUrl(lookup.version, lookup.target);
  if (!await lookup.reachable(url)) {
    throw new RuntimeMissing(
      `the Deno runtime (denort) for compiling is missing: no DENORT_BIN, no ${cachePath}, ` +
        `and ${new URL(url).host} cannot be reached; ${how}`,
    );
  }
  return { kind: "download", url, cachePath };
}
