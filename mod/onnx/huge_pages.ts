/**
 * Whether ONNX Runtime's tensors get transparent huge pages. With its memory
 * arena off, every tensor of a run is allocated from the C library and given
 * back after it; large ones are fresh `mmap`s, so each 4 KiB page of them
 * faults once per allocation. A session's first run at a given shape has no
 * memory plan yet and allocates every intermediate on its own: on the
 * full-size VAE encoder at 512×512 that was 1.75 M page faults against 98 k
 * in a planned run, and on a shared 2-core VM the first run took 190 s
 * against 37 s. With the C library asked to back its allocations with 2 MiB
 * pages (glibc ≥ 2.35's tunable `glibc.malloc.hugetlb=1`, which madvises
 * them `MADV_HUGEPAGE`), the same first run faulted 44 k times and took 51 s,
 * and a planned run 196 times (docs/performance.md, "Warm starts").
 *
 * The tunable is read once, when the process starts, from the environment
 * (`GLIBC_TUNABLES`); `deno task serve` sets it. The kernel honours it when
 * transparent huge pages are "madvise" or "always"
 * (`/sys/kernel/mm/transparent_hugepage/enabled`, the kernel's
 * admin-guide/mm/transhuge.rst); with "always" every large allocation gets
 * them anyway.
 *
 * @module
 */

import { readSystemText } from "./system_files.ts";

/** How large allocations are backed in this process. */
export interface HugePages {
  /** The kernel's transparent huge page mode, or null where it cannot be read. */
  system: "always" | "madvise" | "never" | null;
  /** Whether the C library madvises its allocations (`glibc.malloc.hugetlb=1` in `GLIBC_TUNABLES`). */
  malloc: boolean;
  /** Whether ONNX Runtime's large tensors get huge pages: system "always", or "madvise" with `malloc`. */
  inEffect: boolean;
}

/** The environment variable glibc reads its tunables from. */
export const GLIBC_TUNABLES = "GLIBC_TUNABLES";

/** The tunable `deno task serve` sets. */
export const MALLOC_HUGETLB = "glibc.malloc.hugetlb=1";

/** Reads the state; pass fabricated sources to test. */
export function hugePages(
  env: (name: string) => string | undefined = readEnv,
  read: (path: string) => string | null = readSystemText,
): HugePages {
  const text = read("/sys/kernel/mm/transparent_hugepage/enabled");
  // The mode in effect is the bracketed one: "always [madvise] never".
  const mode = text === null ? null : /\[(always|madvise|never)\]/.exec(text)?.[1] ?? null;
  const system = mode as HugePages["system"];
  // glibc reads "name=value" pairs separated by colons; a later pair wins.
  let malloc = false;
  for (const pair of (env(GLIBC_TUNABLES) ?? "").split(":")) {
    const [name, value] = pair.split("=");
    if (name.trim() === "glibc.malloc.hugetlb") malloc = (value ?? "").trim() === "1";
  }
  return { system, malloc, inEffect: system === "always" || (system === "madvise" && malloc) };
}

function readEnv(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined; // no permission for it: treated as unset
  }
}
