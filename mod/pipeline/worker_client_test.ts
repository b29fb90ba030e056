import { deepStrictEqual, ok, rejects, strictEqual } from "node:assert";
import { join } from "node:path";
import { ToolError } from "../mcp/tool.ts";
import { tinyConfig, tinyModels } from "./_testing.ts";
import { createEngine } from "./engine.ts";
import type { GenerationRequest } from "./types.ts";
import { createWorkerGenerator } from "./worker_client.ts";
import type { FromWorker } from "./worker_protocol.ts";

const root = await tinyModels("worker");

function t2i(over: Partial<GenerationRequest> = {}): GenerationRequest {
  return {
    mode: "text_to_image",
    positive: "a castle at dawn",
    negative: "",
    width: 64,
    height: 64,
    seed: 11,
    ...over,
  } as GenerationRequest;
}

Deno.test("worker: same pixels as the in-process engine, progress per step", async () => {
  const config = tinyConfig(root);
  const generator = await createWorkerGenerator({ config });
  const engine = await createEngine(config);
  try {
    const seen: Array<[number, number]> = [];
    const viaWorker = await generator.generate(t2i(), { onProgress: (s, t) => seen.push([s, t]) });
    const inProcess = await engine.generate(t2i());
    deepStrictEqual(viaWorker.image.data, inProcess.image.data);
    strictEqual(viaWorker.image.width, 64);
    deepStrictEqual(seen, [[1, 4], [2, 4], [3, 4], [4, 4]]);
    ok(generator.info.models[join(root, "sd15", "unet", "model.onnx")] === "unet");
  } finally {
    await engine.release();
    await generator.close();
  }
});

Deno.test("worker: abort after the first progress stops the run and frees the worker", async () => {
  const messages: FromWorker[] = [];
  const generator = await createWorkerGenerator({
    config: tinyConfig(root, { generation: { steps: 40 } }),
    onWorkerMessage: (m) => messages.push(m),
  });
  try {
    const controller = new AbortController();
    const reason = new Error("client went away");
    let progressCalls = 0;
    await rejects(
      generator.generate(t2i({ width: 256, height: 256 }), {
        signal: controller.signal,
        onProgress: () => {
          progressCalls++;
          controller.abort(reason);
        },
      }),
      (e) => e === reason,
    );
    strictEqual(progressCalls, 1, "no progress after the abort");
    const next = await generator.generate(t2i(), {});
    strictEqual(next.image.width, 64, "the worker serves the next request");
    // The Worker stopped the aborted run early instead of finishing its 41 steps.
    const cancelled = messages.find((m) => m.type === "error" && m.error.category === "cancelled");
    ok(cancelled, "the Worker reported the cancellation");
    const steps = messages.filter((m) =>
      m.type === "progress" && m.id === (cancelled as { id: number }).id
    );
    ok(steps.length < 41, `stopped after ${steps.length} of 41 steps`);
    // An already aborted signal never reaches the Worker.
    const aborted = AbortSignal.abort(reason);
    await rejects(generator.generate(t2i(), { signal: aborted }), (e) => e === reason);
  } finally {
    await generator.close();
  }
});

Deno.test("worker: the main thread stays responsive while a generation runs", async () => {
  const generator = await createWorkerGenerator({
    config: tinyConfig(root, { generation: { steps: 50 } }),
  });
  try {
    // Ordering, not timing: timers scheduled during the run fire before it ends.
    let finished = false;
    let timerFiredDuringRun = 0;
    let probing = false;
    const probe = () =>
      setTimeout(() => {
        if (!finished) timerFiredDuringRun++;
        if (!finished) probe();
      }, 1);
    const run = generator.generate(t2i({ width: 512, height: 512 }), {
      onProgress: (step) => {
        if (step === 1 && !probing) {
          probing = true;
          probe();
        }
      },
    }).finally(() => finished = true);
    await run;
    ok(timerFiredDuringRun >= 2, `${timerFiredDuringRun} timers fired during the run`);
  } finally {
    await generator.close();
  }
});

Deno.test("worker: start-up errors name the file; tool errors keep their category", async () => {
  const config = tinyConfig(root);
  config.models.base = join(root, "no-such-set");
  await rejects(createWorkerGenerator({ config }), (e: Error) => {
    ok(e.message.includes(join(root, "no-such-set", "tokenizer")), e.message);
    return true;
  });
  const generator = await createWorkerGenerator({ config: tinyConfig(root) });
  try {
    await rejects(
      generator.generate({
        ...t2i(),
        mode: "guided_image",
        controlMode: "depth",
        image: { width: 64, height: 64, data: new Uint8Array(64 * 64 * 3) },
      }),
      (e: ToolError) =>
        e instanceof ToolError && e.category === "configuration" &&
        e.message.includes("controlnet.depth.enabled"),
    );
  } finally {
    await generator.close();
  }
  await rejects(generator.generate(t2i()), ToolError);
});

Deno.test("worker: a crash rejects the pending request as inference; the next one restarts it", async () => {
  const messages: FromWorker[] = [];
  const generator = await createWorkerGenerator({
    config: tinyConfig(root),
    workerUrl: new URL("./_test_worker.ts", import.meta.url),
    onWorkerMessage: (m) => messages.push(m),
  });
  try {
    await rejects(
      generator.generate(t2i({ positive: "__crash__", width: 256, height: 256 })),
      (e: ToolError) =>
        e instanceof ToolError && e.category === "inference" && /crashed/.test(e.message),
    );
    const after = await generator.generate(t2i());
    strictEqual(after.image.data.length, 64 * 64 * 3);
    strictEqual(messages.filter((m) => m.type === "ready").length, 2, "a new Worker was started");
  } finally {
    await generator.close();
  }
});

Deno.test("worker: out of memory → out_of_memory ToolError, sessions released, reloaded lazily", async () => {
  const messages: FromWorker[] = [];
  const generator = await createWorkerGenerator({
    config: tinyConfig(root),
    workerUrl: new URL("./_test_worker.ts", import.meta.url),
    onWorkerMessage: (m) => messages.push(m),
  });
  try {
    await rejects(
      generator.generate(t2i({ positive: "__oom__" })),
      (e: ToolError) =>
        e instanceof ToolError && e.category === "out_of_memory" &&
        /Failed to allocate/.test(e.message),
    );
    const failure = messages.find((m) => m.type === "error");
    strictEqual(
      failure?.type === "error" && failure.released,
      true,
      "the Worker released its sessions",
    );
    strictEqual(messages.filter((m) => m.type === "ready").length, 1);
    const after = await generator.generate(t2i());
    strictEqual(after.image.width, 64);
    strictEqual(
      messages.filter((m) => m.type === "ready").length,
      2,
      "reloaded for the next request",
    );
  } finally {
    await generator.close();
  }
});

Deno.test("worker: with warmUp, ready comes first and the warm-up image is made before any request; images are unchanged", async () => {
  const messages: FromWorker[] = [];
  const config = { ...tinyConfig(root), warmUp: { width: 64, height: 64 } };
  const generator = await createWorkerGenerator({
    config,
    onWorkerMessage: (m) => messages.push(m),
  });
  const engine = await createEngine(tinyConfig(root));
  try {
    strictEqual(messages[0]?.type, "ready", "ready before the warm-up");
    // Asked at once: the request runs after the warm-up, which says its cost first.
    const image = (await generator.generate(t2i())).image.data;
    const types = messages.map((m) => m.type);
    const warmed = messages.find((m) => m.type === "warmed_up");
    ok(warmed && warmed.type === "warmed_up" && warmed.ms >= 0, "the warm-up says its cost");
    const at = types.indexOf("warmed_up");
    ok(at > 0 && at < types.indexOf("result"), types.join(", "));
    ok(types.indexOf("progress") > at, `the warm-up posts no progress: ${types.join(", ")}`);
    deepStrictEqual(image, (await engine.generate(t2i())).image.data);
  } finally {
    await engine.release();
    await generator.close();
  }
});
