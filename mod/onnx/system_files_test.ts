import { ok, strictEqual } from "node:assert";
import { processExists, readSystemText } from "./system_files.ts";
import { ignoredFor } from "../../tests/helpers/ignore.ts";

Deno.test({
  ...ignoredFor(
    Deno.build.os === "linux" ? undefined : "Linux only: reads /proc",
    "readSystemText: reads /proc past Deno's --allow-all guard; a missing file is null",
  ),
  fn: () => {
    const status = readSystemText("/proc/self/status");
    ok(status !== null && /^Pid:\s*\d+$/m.test(status), "the process's own status");
    strictEqual(Number(/^Tgid:\s*(\d+)$/m.exec(status!)![1]), Deno.pid);
    const mountinfo = readSystemText("/proc/self/mountinfo");
    ok(mountinfo !== null && mountinfo.includes(" - "), "mountinfo, longer than one read");
    strictEqual(readSystemText("/proc/self/no-such-file"), null);
  },
});

Deno.test({
  ...ignoredFor(
    Deno.build.os === "linux" ? undefined : "Linux only: reads /proc",
    "processExists: this process yes, a child that has exited no",
  ),
  fn: async () => {
    strictEqual(processExists(Deno.pid), true);
    strictEqual(processExists(1), true, "init exists (another user's: EPERM still counts)");
    const child = new Deno.Command("true").spawn();
    await child.status;
    strictEqual(processExists(child.pid), false);
    strictEqual(processExists(-3), false);
  },
});
