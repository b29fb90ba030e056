import { deepStrictEqual, strictEqual } from "node:assert";
import { hugePages } from "./huge_pages.ts";

const sysfs = (mode: string) => (path: string) =>
  path === "/sys/kernel/mm/transparent_hugepage/enabled"
    ? ["always", "madvise", "never"].map((m) => (m === mode ? `[${m}]` : m)).join(" ") + "\n"
    : null;
const env = (value?: string) => (name: string) => name === "GLIBC_TUNABLES" ? value : undefined;

Deno.test("hugePages: madvise mode needs the malloc tunable; always needs nothing", () => {
  deepStrictEqual(hugePages(env("glibc.malloc.hugetlb=1"), sysfs("madvise")), {
    system: "madvise",
    malloc: true,
    inEffect: true,
  });
  deepStrictEqual(hugePages(env(undefined), sysfs("madvise")), {
    system: "madvise",
    malloc: false,
    inEffect: false,
  });
  deepStrictEqual(hugePages(env(undefined), sysfs("always")), {
    system: "always",
    malloc: false,
    inEffect: true,
  });
  strictEqual(hugePages(env("glibc.malloc.hugetlb=1"), sysfs("never")).inEffect, false);
});

Deno.test("hugePages: the tunable among others, the last one winning; unreadable sysfs", () => {
  strictEqual(hugePages(env(":glibc.malloc.hugetlb=1"), sysfs("madvise")).malloc, true);
  strictEqual(
    hugePages(env("glibc.malloc.check=0:glibc.malloc.hugetlb=1"), sysfs("madvise")).malloc,
    true,
  );
  strictEqual(
    hugePages(env("glibc.malloc.hugetlb=1:glibc.malloc.hugetlb=0"), sysfs("madvise")).malloc,
    false,
  );
  strictEqual(hugePages(env("glibc.malloc.hugetlb=0"), sysfs("madvise")).malloc, false);
  deepStrictEqual(hugePages(env("glibc.malloc.hugetlb=1"), () => null), {
    system: null,
    malloc: true,
    inEffect: false,
  });
});
