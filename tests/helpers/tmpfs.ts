/**
 * A small tmpfs for full-disk tests (Linux, root): whether one can be
 * mounted here, mounting, measuring and resizing one, and filling a file
 * system until ENOSPC.
 *
 * @module
 */

const MIB = 1 << 20;

async function run(program: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(program, { args, stdout: "piped", stderr: "piped" }).output();
  const decoder = new TextDecoder();
  if (!out.success) {
    throw new Error(`${program} ${args.join(" ")}: ${decoder.decode(out.stderr).trim()}`);
  }
  return decoder.decode(out.stdout);
}

/** Mounts a tmpfs of `bytes` (rounded up to whole MiB) at `dir`, its root `mode`. */
export async function mountTmpfs(dir: string, bytes: number, mode = 0o711): Promise<void> {
  const size = `size=${Math.ceil(bytes / MIB)}m,mode=${mode.toString(8).padStart(4, "0")}`;
  await run("mount", ["-t", "tmpfs", "-o", size, "tmpfs", dir]);
}

/** Gives the tmpfs at `dir` a new size (`bytes`, rounded up to whole MiB); never below its use. */
export async function resizeTmpfs(dir: string, bytes: number): Promise<void> {
  await run("mount", ["-o", `remount,size=${Math.ceil(bytes / MIB)}m`, dir]);
}

/** Bytes in use on the file system mounted at `dir` (statfs, through `df`). */
export async function usedBytes(dir: string): Promise<number> {
  const lines = (await run("df", ["-B1", "--output=used", dir])).trim().split("\n");
  return Number(lines.at(-1));
}

/** Bytes under `path` as `du` counts them (allocated blocks), or 0 when it is not there. */
export async function treeBytes(path: string): Promise<number> {
  try {
    await Deno.lstat(path);
  } catch {
    return 0;
  }
  return Number((await run("du", ["-sB1", path])).split("\t")[0]);
}

/** Unmounts `dir` (lazily: a process may still hold a file there). */
export async function unmountTmpfs(dir: string): Promise<void> {
  await new Deno.Command("umount", { args: ["-l", dir] }).output();
}

/** Why a tmpfs cannot be mounted here, or undefined when it can. */
export async function tmpfsUnavailable(): Promise<string | undefined> {
  if (Deno.build.os !== "linux") return `not Linux (${Deno.build.os})`;
  const dir = await Deno.makeTempDir({ prefix: "sdmcp-tmpfs-probe-" });
  try {
    const mounted = await new Deno.Command("mount", {
      args: ["-t", "tmpfs", "-o", "size=1m", "tmpfs", dir],
      stdout: "null",
      stderr: "piped",
    }).output().catch((error) => ({
      success: false,
      stderr: new TextEncoder().encode(String(error)),
    }));
    if (!mounted.success) {
      return `mount -t tmpfs failed: ${new TextDecoder().decode(mounted.stderr).trim()}`;
    }
    await new Deno.Command("umount", { args: [dir] }).output();
    return undefined;
  } finally {
    await Deno.remove(dir).catch(() => {});
  }
}

/** Fills the filesystem at `dir` with `path` until ENOSPC. */
export async function fill(path: string): Promise<void> {
  const file = await Deno.open(path, { write: true, create: true, append: true });
  try {
    for (const size of [1 << 20, 4096, 512]) {
      const chunk = new Uint8Array(size);
      try {
        for (;;) await file.write(chunk);
      } catch (error) {
        if (!/No space left|ENOSPC|os error 28/i.test(String(error))) throw error;
      }
    }
  } finally {
    file.close();
  }
}
