import { deepStrictEqual, strictEqual, throws } from "node:assert";
import { buildVaeDecoder, TINY_DIMS } from "../../tests/fixtures/builder/mod.ts";
import { createSessionFromBytes, ortSessionOptions } from "./runtime.ts";
import { sessionThreads, threadsText } from "./threads.ts";
import { readSystemText } from "./system_files.ts";
import { processUsableCores, type UsableCores } from "./usable_cores.ts";
import { ignoredFor } from "../../tests/helpers/ignore.ts";

const TWO: UsableCores = { count: 2, affinity: 2, cgroupQuota: null, limitedBy: "affinity" };
const QUOTA: UsableCores = { count: 3, affinity: 16, cgroupQuota: 3.5, limitedBy: "cgroup quota" };

Deno.test("sessionThreads: 0 is the usable cores; a written count stands", () => {
  deepStrictEqual(sessionThreads({ intraOpThreads: 0 }, TWO), {
    intraOp: 2,
    interOp: 0,
    usableCores: TWO,
  });
  strictEqual(sessionThreads({}, QUOTA).intraOp, 3);
  strictEqual(sessionThreads({ intraOpThreads: 1 }, QUOTA).intraOp, 1);
  strictEqual(sessionThreads({ intraOpThreads: 12 }, TWO).intraOp, 12);
});

Deno.test("sessionThreads: inter-op threads only under parallel execution, 0 = the usable cores", () => {
  strictEqual(sessionThreads({ interOpThreads: 4, executionMode: "sequential" }, QUOTA).interOp, 0);
  strictEqual(sessionThreads({ interOpThreads: 0, executionMode: "parallel" }, QUOTA).interOp, 3);
  strictEqual(sessionThreads({ interOpThreads: 2, executionMode: "parallel" }, QUOTA).interOp, 2);
});

Deno.test("sessionThreads: a count that is not an integer >= 0 is refused", () => {
  throws(() => sessionThreads({ intraOpThreads: -1 }, TWO), /intraOpThreads must be an integer/);
  throws(() => sessionThreads({ interOpThreads: 1.5 }, TWO), /interOpThreads must be an integer/);
});

Deno.test("ortSessionOptions: the resolved counts reach ONNX Runtime's session options", () => {
  const cpu = ortSessionOptions({ intraOpThreads: 0, interOpThreads: 0 }, QUOTA);
  strictEqual(cpu.intraOpNumThreads, 3);
  strictEqual(cpu.interOpNumThreads, undefined, "sequential: no inter-op pool asked for");
  const parallel = ortSessionOptions({ executionMode: "parallel" }, TWO);
  strictEqual(parallel.intraOpNumThreads, 2);
  strictEqual(parallel.interOpNumThreads, 2);
  strictEqual(parallel.executionMode, "parallel");
  strictEqual(ortSessionOptions({ intraOpThreads: 1 }, QUOTA).intraOpNumThreads, 1);
});

Deno.test("threadsText: says the count and what decided it", () => {
  strictEqual(
    threadsText(sessionThreads({}, QUOTA)),
    "3 intra-op threads (3 usable cores: affinity 16 CPUs, cgroup quota 3.5 CPUs)",
  );
  strictEqual(
    threadsText(sessionThreads({ executionMode: "parallel" }, TWO)),
    "2 intra-op threads, 2 inter-op (2 usable cores: affinity 2 CPUs, no cgroup CPU quota)",
  );
  strictEqual(
    threadsText(sessionThreads({ intraOpThreads: 1 }, TWO)),
    "1 intra-op thread (2 usable cores: affinity 2 CPUs, no cgroup CPU quota)",
  );
});

Deno.test({
  ...ignoredFor(
    Deno.build.os === "linux" ? undefined : "Linux only: reads /proc",
    "a session opened with 0 intra-op threads starts a pool of the usable cores (Linux)",
  ),
  fn: async () => {
    const tasks = () => Number(/^Threads:\s*(\d+)/m.exec(readSystemText("/proc/self/status")!)![1]);
    const model = buildVaeDecoder(1, TINY_DIMS, { flavour: "diffusers", io: "float32" }).model;
    // ONNX Runtime starts one thread of its own with the first session of a process;
    // a one-thread session (no pool) takes it out of the count.
    const first = await createSessionFromBytes(model, [], { intraOpThreads: 1 });
    const before = tasks();
    const one = await createSessionFromBytes(model, [], { intraOpThreads: 1 });
    strictEqual(tasks() - before, 0, "one intra-op thread is the caller's: no pool thread");
    const all = await createSessionFromBytes(model, [], { intraOpThreads: 0 });
    try {
      // N intra-op threads are the caller and N - 1 pool threads.
      strictEqual(tasks() - before, processUsableCores().count - 1);
    } finally {
      await Promise.all([first.release(), one.release(), all.release()]);
    }
  },
});
