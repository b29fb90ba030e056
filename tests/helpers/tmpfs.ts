/**
 * A small tmpfs for full-disk tests (Linux, root): whether one can be
 * mounted here, and filling a file system until ENOSPC.
 *
 * @module
 */

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
