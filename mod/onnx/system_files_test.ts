import { ok, strictEqual } from "node:assert";
import { processExists, readSystemText } from "./system_files.ts";

Deno.test({
  name: "readSystemText: reads /proc past Deno's --allow-all guard; a missing file is null",
  ignore: Deno.build.os !== "linux",
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
  name: "processExists: this process yes, a child that has exited no",
  ignore: Deno.build.os !== "linux",
  fn: async () => {
    strictEqual(processExists(Deno.pid), true);
    strictEqual(processExists(1), true, "init exists (another user's: EPERM still counts)");
    const child = new Deno.Command("true").spawn();
    await child.status;
    strictEqual(processExists(child.pid), false);
    strictEqual(processExists(-3), false);
  },
});
