import { deepStrictEqual, strictEqual } from "node:assert";
import { affinityCount, cfsQuota, cpuMax, type ReadText, usableCores } from "./usable_cores.ts";

/** A reader over fabricated files; anything else is missing. */
function files(texts: Record<string, string>): ReadText {
  return (path) => texts[path] ?? null;
}

const status = (list: string) => `Name:\tdeno\nCpus_allowed:\tff\nCpus_allowed_list:\t${list}\n`;

/** mountinfo of a cgroup v2 system (Debian 12, systemd), one cgroup2 mount. */
const MOUNTINFO_V2 = [
  "22 28 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw",
  "26 23 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot",
  "28 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro",
].join("\n");

/** mountinfo of a cgroup v1 (hybrid) system: cpu and cpuacct mounted together, cgroup2 unified. */
const MOUNTINFO_V1 = [
  "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755",
  "31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct",
  "33 30 0:30 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset",
  "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw",
].join("\n");

Deno.test("affinityCount: counts the CPUs of Cpus_allowed_list, ranges and single CPUs", () => {
  strictEqual(affinityCount(status("0-1")), 2);
  strictEqual(affinityCount(status("0")), 1);
  strictEqual(affinityCount(status("0-3,8,10-11")), 7);
  strictEqual(affinityCount(status("0-63")), 64);
  strictEqual(affinityCount("Name:\tdeno\n"), null, "no such line");
  strictEqual(affinityCount(status("3-1")), null, "a backwards range is not trusted");
  strictEqual(affinityCount(null), null);
});

Deno.test("cpuMax and cfsQuota: quota over period in CPUs; no limit is null", () => {
  strictEqual(cpuMax("150000 100000\n"), 1.5);
  strictEqual(cpuMax("200000 100000"), 2);
  strictEqual(cpuMax("max 100000\n"), null);
  strictEqual(cpuMax("garbage"), null);
  strictEqual(cfsQuota("50000\n", "100000\n"), 0.5);
  strictEqual(cfsQuota("-1\n", "100000\n"), null);
  strictEqual(cfsQuota(null, "100000"), null);
});

Deno.test("usableCores: the affinity mask alone when no cgroup quota is set", () => {
  const cores = usableCores(
    files({
      "/proc/self/status": status("0-1"),
      "/proc/self/cgroup": "0::/user.slice/user-1000.slice/session-3.scope\n",
      "/proc/self/mountinfo": MOUNTINFO_V2,
      "/sys/fs/cgroup/user.slice/user-1000.slice/session-3.scope/cpu.max": "max 100000\n",
      "/sys/fs/cgroup/user.slice/user-1000.slice/cpu.max": "max 100000\n",
      "/sys/fs/cgroup/user.slice/cpu.max": "max 100000\n",
    }),
    () => 64,
  );
  deepStrictEqual(cores, { count: 2, affinity: 2, cgroupQuota: null, limitedBy: "affinity" });
});

Deno.test("usableCores: a cgroup v2 quota caps the affinity mask, the smallest along the path, rounded down", () => {
  const cores = usableCores(
    files({
      "/proc/self/status": status("0-7"),
      "/proc/self/cgroup": "0::/system.slice/sd.service\n",
      "/proc/self/mountinfo": MOUNTINFO_V2,
      "/sys/fs/cgroup/system.slice/sd.service/cpu.max": "350000 100000\n",
      // The parent's limit is smaller: it is the one that binds.
      "/sys/fs/cgroup/system.slice/cpu.max": "250000 100000\n",
    }),
    () => 64,
  );
  deepStrictEqual(cores, { count: 2, affinity: 8, cgroupQuota: 2.5, limitedBy: "cgroup quota" });
});

Deno.test("usableCores: a container's own cgroup namespace (path /) reads the mount's cpu.max", () => {
  const cores = usableCores(
    files({
      "/proc/self/status": status("0-15"),
      "/proc/self/cgroup": "0::/\n",
      "/proc/self/mountinfo": MOUNTINFO_V2,
      "/sys/fs/cgroup/cpu.max": "400000 100000\n",
    }),
    () => 16,
  );
  deepStrictEqual(cores, { count: 4, affinity: 16, cgroupQuota: 4, limitedBy: "cgroup quota" });
});

Deno.test("usableCores: a mount of a sub-hierarchy (mountinfo root) is not walked twice", () => {
  const cores = usableCores(
    files({
      "/proc/self/status": status("0-3"),
      "/proc/self/cgroup": "0::/kubepods/pod1/ctr\n",
      "/proc/self/mountinfo":
        "26 23 0:23 /kubepods/pod1 /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw",
      "/sys/fs/cgroup/ctr/cpu.max": "100000 100000\n",
    }),
    () => 4,
  );
  deepStrictEqual(cores, { count: 1, affinity: 4, cgroupQuota: 1, limitedBy: "cgroup quota" });
});

Deno.test("usableCores: cgroup v1 cpu,cpuacct quota on a hybrid system whose unified tree has none", () => {
  const cores = usableCores(
    files({
      "/proc/self/status": status("0-3"),
      "/proc/self/cgroup": [
        "9:cpuset:/",
        "4:cpu,cpuacct:/docker/abc",
        "0::/docker/abc",
      ].join("\n"),
      "/proc/self/mountinfo": MOUNTINFO_V1,
      "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "150000\n",
      "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
      "/sys/fs/cgroup/cpu,cpuacct/docker/cpu.cfs_quota_us": "-1\n",
      "/sys/fs/cgroup/cpu,cpuacct/docker/cpu.cfs_period_us": "100000\n",
    }),
    () => 4,
  );
  deepStrictEqual(cores, { count: 1, affinity: 4, cgroupQuota: 1.5, limitedBy: "cgroup quota" });
});

Deno.test("usableCores: a quota below one CPU still leaves one thread", () => {
  const cores = usableCores(
    files({
      "/proc/self/status": status("0-1"),
      "/proc/self/cgroup": "0::/\n",
      "/proc/self/mountinfo": MOUNTINFO_V2,
      "/sys/fs/cgroup/cpu.max": "20000 100000\n",
    }),
    () => 2,
  );
  deepStrictEqual(cores, { count: 1, affinity: 2, cgroupQuota: 0.2, limitedBy: "cgroup quota" });
});

Deno.test("usableCores: a quota above the affinity mask leaves the mask", () => {
  const cores = usableCores(
    files({
      "/proc/self/status": status("2-3"),
      "/proc/self/cgroup": "0::/\n",
      "/proc/self/mountinfo": MOUNTINFO_V2,
      "/sys/fs/cgroup/cpu.max": "800000 100000\n",
    }),
    () => 16,
  );
  deepStrictEqual(cores, { count: 2, affinity: 2, cgroupQuota: 8, limitedBy: "affinity" });
});

Deno.test("usableCores: nothing readable (not Linux) falls back to the runtime's CPU count", () => {
  deepStrictEqual(usableCores(files({}), () => 6), {
    count: 6,
    affinity: null,
    cgroupQuota: null,
    limitedBy: "runtime",
  });
});

Deno.test("usableCores: mount points with escaped spaces are unescaped", () => {
  const cores = usableCores(
    files({
      "/proc/self/status": status("0-3"),
      "/proc/self/cgroup": "0::/a\n",
      "/proc/self/mountinfo": "26 23 0:23 / /mnt/cg\\040root rw - cgroup2 cgroup2 rw",
      "/mnt/cg root/a/cpu.max": "300000 100000",
    }),
    () => 4,
  );
  strictEqual(cores.count, 3);
});

Deno.test("usableCores: this process's real files give at least one core, within the mask", () => {
  const cores = usableCores();
  strictEqual(Number.isInteger(cores.count) && cores.count >= 1, true);
  if (cores.affinity !== null) strictEqual(cores.count <= cores.affinity, true);
});
