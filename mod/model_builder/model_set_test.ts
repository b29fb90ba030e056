import { deepStrictEqual, notStrictEqual, ok, strictEqual } from "node:assert";
import { checkSession, type Component, createSession } from "../onnx/mod.ts";
import { parseLock } from "./lock.ts";
import { buildTinyModelSet, SD_SETS, STAMP_FILE, tinyModelFiles } from "./model_set.ts";

/** models.lock component → contract component checked against it. */
const CONTRACT_OF: Record<string, Component> = {
  text_encoder: "text_encoder",
  unet: "unet",
  vae_decoder: "vae_decoder",
  vae_encoder: "vae_encoder",
  controlnet_depth: "controlnet",
  controlnet_openpose: "controlnet",
  controlnet_inpaint: "controlnet",
  controlnet_unet: "controlnet_unet",
  depth: "depth",
  pose_detector: "pose_detector",
  pose_estimator: "pose_estimator",
};

async function sha256(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

Deno.test("buildTinyModelSet: writes the layout, a matching models.lock, and is fast", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "tiny_set_" });
  try {
    const set = await buildTinyModelSet(`${tmp}/models`);
    strictEqual(set.skipped, false);
    strictEqual(set.lockPath, `${tmp}/models.lock`);

    const lock = parseLock(await Deno.readTextFile(`${tmp}/models.lock`));
    deepStrictEqual(lock.map((e) => e.path), set.entries.map((e) => e.path).sort());
    for (const e of lock) {
      const bytes = await Deno.readFile(`${tmp}/models/${e.path}`);
      strictEqual(e.size, bytes.byteLength, e.path);
      strictEqual(e.sha256, await sha256(bytes), e.path);
      strictEqual(e.url, `fixture://${e.path}`);
      const limit = e.path.endsWith(".onnx") ? 500_000 : 2_000_000; // vocab.json is ~1 MB
      ok(bytes.byteLength < limit, `${e.path} is ${bytes.byteLength} bytes`);
    }
    const paths = new Set(lock.map((e) => e.path));
    for (
      const p of [
        "sd15/text_encoder/model.onnx",
        "sd15/unet/model.onnx",
        "sd15/unet/weights.pb",
        "sd15/vae_decoder/model.onnx",
        "sd15/vae_encoder/model.onnx",
        "sd15/tokenizer/vocab.json",
        "sd15/tokenizer/merges.txt",
        "sd15/scheduler/scheduler_config.json",
        "sd15/controlnet_unet/model.onnx",
        "sd15/controlnet_unet/weights.pb",
        "sd15-optimum/unet/model.onnx_data",
        "sd15-optimum-scalar/unet/model.onnx",
        "sd15-fp16/unet/model.onnx",
        "controlnet/depth.onnx",
        "controlnet/openpose.onnx",
        "controlnet/inpaint.onnx",
        "annotators/depth.onnx",
        "annotators/yolox_l.onnx",
        "annotators/dw-ll_ucoco_384.onnx",
      ]
    ) ok(paths.has(p), `lock lists ${p}`);

    // Every model opens from its path (external data found by ORT) and fits its contract.
    for (const e of lock) {
      if (!e.path.endsWith(".onnx")) continue;
      const s = await createSession(`${tmp}/models/${e.path}`, { intraOpThreads: 1 });
      try {
        const io = checkSession(CONTRACT_OF[e.component], s);
        strictEqual(io.component, CONTRACT_OF[e.component]);
      } finally {
        await s.release();
      }
    }

    // SD 1.5 scheduler config (scheduler_config.ts) and the real CLIP vocabulary.
    const sched = JSON.parse(
      await Deno.readTextFile(`${tmp}/models/sd15/scheduler/scheduler_config.json`),
    );
    strictEqual(sched._class_name, "PNDMScheduler");
    strictEqual(sched.beta_start, 0.00085);
    strictEqual(sched.beta_end, 0.012);
    strictEqual(sched.beta_schedule, "scaled_linear");
    strictEqual(sched.steps_offset, 1);
    strictEqual(sched.skip_prk_steps, true);
    for (const dir of SD_SETS.map((s) => s.dir)) {
      const vocab = JSON.parse(
        await Deno.readTextFile(`${tmp}/models/${dir}/tokenizer/vocab.json`),
      );
      strictEqual(Object.keys(vocab).length, 49408, dir);
      strictEqual(vocab["<|endoftext|>"], 49407);
      strictEqual(vocab["<|startoftext|>"], 49406);
    }

    // Second call: stamp matches, nothing rewritten.
    const mtime = (await Deno.stat(`${tmp}/models/sd15/unet/model.onnx`)).mtime;
    const again = await buildTinyModelSet(`${tmp}/models`);
    strictEqual(again.skipped, true);
    deepStrictEqual(again.entries.map((e) => e.sha256).sort(), lock.map((e) => e.sha256).sort());
    deepStrictEqual((await Deno.stat(`${tmp}/models/sd15/unet/model.onnx`)).mtime, mtime);

    // A deleted file or a different seed forces a rebuild.
    await Deno.remove(`${tmp}/models/annotators/depth.onnx`);
    strictEqual((await buildTinyModelSet(`${tmp}/models`)).skipped, false);
    const reseeded = await buildTinyModelSet(`${tmp}/models`, { seed: 99 });
    strictEqual(reseeded.skipped, false);
    ok(JSON.parse(await Deno.readTextFile(`${tmp}/models/${STAMP_FILE}`)).seed === 99);
    const unetA = lock.find((e) => e.path === "sd15/unet/weights.pb")!.sha256;
    const unetB = reseeded.entries.find((e) => e.path === "sd15/unet/weights.pb")!.sha256;
    notStrictEqual(unetA, unetB);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("tinyModelFiles: byte-identical for one seed, different for another", async () => {
  const a = tinyModelFiles(5);
  const b = tinyModelFiles(5);
  const c = tinyModelFiles(6);
  deepStrictEqual(a.map((f) => f.path), b.map((f) => f.path));
  for (let i = 0; i < a.length; i++) {
    strictEqual(await sha256(a[i].data), await sha256(b[i].data), a[i].path);
  }
  const weights = (fs: typeof a) => fs.find((f) => f.path === "controlnet/depth.onnx")!.data;
  notStrictEqual(await sha256(weights(a)), await sha256(weights(c)));
});
