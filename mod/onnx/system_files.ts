/**
 * Reads the kernel's own files (`/proc`, `/sys`) and asks whether a process
 * is alive. Deno keeps `/proc`, `/sys` and `/dev` behind `--allow-all` (its
 * permission model treats them as able to escalate: `/proc/self/mem`,
 * `/proc/<pid>/environ`; github.com/denoland/deno issues 23703, 27564), so a
 * server run with narrow permissions cannot read `/proc/self/status` even with
 * `--allow-read`. It already holds `--allow-ffi` (ONNX Runtime is a native
 * addon), which Deno documents as unsandboxed; through it these few reads go
 * to the C library directly (`open`/`read`/`close`, `kill(pid, 0)`). Where
 * Deno's own read is allowed (`--allow-all`) that is used first. This is the
 * only file that loads the C library.
 *
 * @module
 */

/** The C library functions used here (glibc's soname; musl's is tried next). */
const SYMBOLS = {
  open: { parameters: ["buffer", "i32"], result: "i32" },
  read: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  close: { parameters: ["i32"], result: "i32" },
  kill: { parameters: ["i32", "i32"], result: "i32" },
} as const;

type Libc = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];

let libc: Libc | null | undefined;

function loadLibc(): Libc | null {
  if (libc !== undefined) return libc;
  libc = null;
  if (Deno.build.os !== "linux") return libc;
  for (const name of ["libc.so.6", "libc.so"]) {
    try {
      libc = Deno.dlopen(name, SYMBOLS).symbols;
      break;
    } catch {
      // No FFI permission, or not this C library: try the next, else read nothing.
    }
  }
  return libc;
}

/** Largest text read (a `/proc/self/mountinfo` of thousands of mounts fits). */
const MAX_BYTES = 4 << 20;

/**
 * The text of a `/proc` or `/sys` file, or null where it does not exist or
 * cannot be read by any means this process has.
 */
export function readSystemText(path: string): string | null {
  try {
    return Deno.readTextFileSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
  }
  const c = loadLibc();
  if (!c) return null;
  const fd = c.open(new TextEncoder().encode(`${path}\0`), 0 /* O_RDONLY */);
  if (fd < 0) return null;
  try {
    const chunks: Uint8Array[] = [];
    let total = 0;
    while (total < MAX_BYTES) {
      const buf = new Uint8Array(65536);
      const n = Number(c.read(fd, buf, BigInt(buf.length)));
      if (n < 0) return null;
      if (n === 0) break;
      chunks.push(buf.subarray(0, n));
      total += n;
    }
    const all = new Uint8Array(total);
    let at = 0;
    for (const chunk of chunks) {
      all.set(chunk, at);
      at += chunk.length;
    }
    return new TextDecoder().decode(all);
  } finally {
    c.close(fd);
  }
}

/**
 * Whether process `pid` exists (`kill(pid, 0)`: 0, or EPERM for another
 * user's process); true where it cannot be asked (not Linux, no FFI), so a
 * caller never removes what a live process may be writing.
 */
export function processExists(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  if (pid === Deno.pid) return true;
  const c = loadLibc();
  if (!c) return true;
  if (c.kill(pid, 0) === 0) return true;
  // errno is not reachable through Deno's FFI; /proc/<pid> tells EPERM (exists) from ESRCH.
  return readSystemText(`/proc/${pid}/stat`) !== null;
}
