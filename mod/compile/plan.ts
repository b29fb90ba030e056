/**
 * The `deno compile` command line of `deno task compile`: the `serve`
 * permission set baked in, the inference Worker's module embedded (it is
 * started by URL, so the module graph does not reach it), the self-extracting
 * mode so the native libraries load from real files, and the other platforms'
 * native packages left out.
 *
 * Why self-extracting: onnxruntime-node's addon (`onnxruntime_binding.node`)
 * loads `libonnxruntime.so.1` from its own folder (`$ORIGIN` rpath), and
 * sharp's addon loads `libvips-cpp` from the sibling `@img/sharp-libvips-*`
 * package. The dynamic loader finds those only as real files on disk, not
 * inside the binary's embedded file system; `--self-extracting` writes the whole
 * embedded file system beside the binary on the first run (a hidden folder
 * next to the executable, Deno 2.7 "store self extracting dir in hidden dir
 * beside executable") and runs from there.
 *
 * @module
 */

import { join, relative } from "node:path";

/** The binary's path, relative to the repository root. */
export const BINARY_PATH = "dist/generate-image-sd15-mcp";

/** The Worker module started by URL from mod/pipeline/worker_client.ts. */
export const WORKER_MODULE = "mod/pipeline/worker.ts";

/** Node's names for a Deno target triple: `process.platform`, `process.arch`, libc. */
export interface NodePlatform {
  /** `process.platform`. */
  os: "linux" | "darwin" | "win32";
  /** `process.arch`. */
  arch: "x64" | "arm64";
  /** Linux only. */
  libc?: "gnu" | "musl";
}

/**
 * Maps a Deno target triple (`Deno.build.target`) to Node's names.
 *
 * @throws Error for a target Deno does not compile for
 */
export function nodePlatformOf(target: string): NodePlatform {
  const arch = target.startsWith("x86_64-")
    ? "x64"
    : target.startsWith("aarch64-")
    ? "arm64"
    : undefined;
  const os = target.includes("-linux-")
    ? "linux"
    : target.includes("-apple-darwin")
    ? "darwin"
    : target.includes("-windows-")
    ? "win32"
    : undefined;
  if (!arch || !os) throw new Error(`unknown target ${target}`);
  return os === "linux"
    ? { os, arch, libc: target.endsWith("-musl") ? "musl" : "gnu" }
    : { os, arch };
}

/** The binary's file name on a target (`.exe` on Windows). */
export function binaryPathFor(target: string): string {
  return nodePlatformOf(target).os === "win32" ? `${BINARY_PATH}.exe` : BINARY_PATH;
}

/**
 * The `deno compile` arguments (after `deno`), for `excludes` relative to the
 * root; `output` defaults to {@link binaryPathFor}.
 */
export function compileArgs(
  target: string,
  excludes: readonly string[],
  output: string = binaryPathFor(target),
): string[] {
  return [
    "compile",
    "-P=serve",
    "--frozen",
    "--self-extracting",
    "--include",
    WORKER_MODULE,
    ...excludes.flatMap((path) => ["--exclude", path]),
    "--output",
    output,
    "main.ts",
  ];
}

async function listDirs(path: string): Promise<string[]> {
  const names: string[] = [];
  try {
    for await (const entry of Deno.readDir(path)) if (entry.isDirectory) names.push(entry.name);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  return names.sort();
}

/**
 * The native packages in `node_modules` that cannot run on `target`, relative
 * to `root`: onnxruntime-node's other `bin/napi-v6/<os>/<arch>` folders (about
 * 245 MB of the package's 290 MB) and sharp's `@img/*` packages for other
 * platforms or the other libc.
 */
export async function foreignNativePackages(root: string, target: string): Promise<string[]> {
  const want = nodePlatformOf(target);
  const store = join(root, "node_modules/.deno");
  const out: string[] = [];
  for (const pkg of await listDirs(store)) {
    if (pkg.startsWith("onnxruntime-node@")) {
      const bin = join(store, pkg, "node_modules/onnxruntime-node/bin/napi-v6");
      for (const os of await listDirs(bin)) {
        for (const arch of await listDirs(join(bin, os))) {
          if (os !== want.os || arch !== want.arch) out.push(join(bin, os, arch));
        }
      }
    }
    // @img+sharp-linux-x64@…, @img+sharp-libvips-linuxmusl-x64@…, @img+sharp-win32-x64@…
    const img = /^@img\+sharp-(?:libvips-)?([a-z0-9]+?)-([a-z0-9]+)@/.exec(pkg);
    if (img) {
      const [, platform, arch] = img;
      const expected = want.os === "linux" && want.libc === "musl" ? "linuxmusl" : want.os;
      if (platform !== expected || arch !== want.arch) out.push(join(store, pkg));
    }
  }
  return out.map((path) => relative(root, path));
}
