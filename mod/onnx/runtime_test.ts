import { deepStrictEqual, ok, rejects, strictEqual, throws } from "node:assert";
import { buildUnet, buildVaeDecoder, TINY_DIMS } from "../../tests/fixtures/builder/mod.ts";
import {
  createSession,
  createSessionFromBytes,
  type ExecutionProvider,
  isDeviceTensor,
  listBackends,
  releaseDeviceTensor,
  Tensor,
} from "./runtime.ts";
import { floatTensor, toFloat32 } from "./tensors.ts";
import { tinyUnetFeeds } from "./testing.ts";

const unet = buildUnet(7, TINY_DIMS, { flavour: "diffusers", io: "float32" });

const feeds = tinyUnetFeeds;

Deno.test("createSession: path load finds weights.pb next to the model; metadata from the model", async () => {
  const dir = await Deno.makeTempDir({ prefix: "onnx_rt_" });
  try {
    await Deno.writeFile(`${dir}/model.onnx`, unet.model);
    await Deno.writeFile(`${dir}/weights.pb`, unet.external!.data);
    strictEqual(unet.external!.location, "weights.pb");
    const s = await createSession(`${dir}/model.onnx`, { intraOpThreads: 1 });
    deepStrictEqual(s.inputs.map((i) => [i.name, i.dtype, i.shape]), [
      ["sample", "float32", ["batch", "channels", "height", "width"]],
      ["timestep", "float32", ["batch"]],
      ["encoder_hidden_states", "float32", ["batch", "sequence", 32]],
    ]);
    deepStrictEqual(s.outputs.map((o) => o.name), ["out_sample"]);
    strictEqual(s.label, `${dir.split("/").pop()}/model.onnx`);
    const out = await s.run(feeds());
    deepStrictEqual(out.out_sample.dims, [1, 4, 8, 8]);

    // The same model from bytes + in-memory external data gives the same numbers.
    const b = await createSessionFromBytes(unet.model, [{
      path: "weights.pb",
      data: unet.external!.data,
    }], {
      graphOptimization: "disabled",
      label: "unet",
    });
    const out2 = await b.run(feeds(), ["out_sample"]);
    const x = toFloat32(out.out_sample);
    const y = toFloat32(out2.out_sample);
    ok(x.every((v, i) => Math.abs(v - y[i]) < 1e-5), "path and bytes sessions agree");
    await s.release();
    await s.release(); // twice is fine
    await rejects(s.run(feeds()), /run after release/);
    await b.release();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("createSessionFromBytes: missing external data and bad feeds fail with the label", async () => {
  await rejects(
    createSessionFromBytes(unet.model, [], { label: "unet" }),
    /^Error: unet: cannot create session: /,
  );
  const s = await createSessionFromBytes(unet.model, [{
    path: "weights.pb",
    data: unet.external!.data,
  }], {
    label: "unet",
  });
  try {
    const bad = feeds();
    delete bad.timestep;
    await rejects(s.run(bad), /^Error: unet: run failed: .*timestep/);
  } finally {
    await s.release();
  }
});

Deno.test("options: thread counts validated, unknown and unavailable providers named", async () => {
  const vae = buildVaeDecoder(1, TINY_DIMS, { flavour: "diffusers", io: "float32" }).model;
  await rejects(createSessionFromBytes(vae, [], { intraOpThreads: -1 }), {
    message: "intraOpThreads must be an integer >= 0, got -1",
  });
  await rejects(createSessionFromBytes(vae, [], { interOpThreads: 1.5 }), {
    message: "interOpThreads must be an integer >= 0, got 1.5",
  });
  await rejects(
    createSessionFromBytes(vae, [], { executionProvider: "tpu" as ExecutionProvider }),
    { message: "unknown execution provider `tpu` (expected cpu, cuda or webgpu)" },
  );
  const backends = listBackends();
  ok(backends.some((b) => b.name === "cpu" && b.bundled), "cpu is always bundled");
  const cuda = backends.find((b) => b.name === "cuda");
  if (!cuda) {
    await rejects(createSessionFromBytes(vae, [], { executionProvider: "cuda" }), {
      message:
        /^execution provider `cuda` is not available in this onnxruntime-node build \(available: /,
    });
  } else {
    // Listed, not bundled: either someone installed its libraries and it starts, or the
    // failure says what to install (or, when installed, what is missing at run time).
    try {
      const s = await createSessionFromBytes(vae, [], { executionProvider: "cuda", label: "vae" });
      strictEqual(s.inputs[0].name, "latent_sample");
      await s.release();
    } catch (e) {
      const message = (e as Error).message;
      strictEqual((e as Error).name, "ExecutionProviderError");
      ok(
        /^vae: cannot create session: execution provider `cuda` (needs ONNX Runtime's CUDA provider libraries|could not start although)/
          .test(message),
        message,
      );
      ok(message.includes("ONNX Runtime said: "), message);
    }
  }
});

Deno.test("options: memory arena, memory pattern and execution mode reach ORT and keep results", async () => {
  const ext = [{ path: "weights.pb", data: unet.external!.data }];
  const base = await createSessionFromBytes(unet.model, ext, { intraOpThreads: 1 });
  const lean = await createSessionFromBytes(unet.model, ext, {
    intraOpThreads: 1,
    interOpThreads: 1,
    cpuMemArena: false,
    memoryPattern: false,
    executionMode: "parallel",
  });
  try {
    const x = toFloat32((await base.run(feeds())).out_sample);
    const y = toFloat32((await lean.run(feeds())).out_sample);
    ok(x.some((v) => v !== 0), "the model computes something");
    ok(x.every((v, i) => Math.abs(v - y[i]) < 1e-5), "same numbers with every option changed");
  } finally {
    await base.release();
    await lean.release();
  }
  await rejects(
    createSessionFromBytes(unet.model, ext, { executionMode: "eager" as "parallel" }),
    { message: 'executionMode must be "sequential" or "parallel", got eager' },
  );
});

Deno.test("outputLocations: gpu-buffer is for the webgpu provider; cpu tensors are never device tensors", async () => {
  const vae = buildVaeDecoder(1, TINY_DIMS, { flavour: "diffusers", io: "float32" }).model;
  await rejects(
    createSessionFromBytes(vae, [], { outputLocations: { sample: "gpu-buffer" } }),
    {
      message: 'outputLocations.sample = "gpu-buffer" needs the webgpu execution provider, not cpu',
    },
  );
  await rejects(
    createSessionFromBytes(vae, [], { outputLocations: { sample: "texture" as "cpu" } }),
    { message: 'outputLocations.sample must be "cpu" or "gpu-buffer", got texture' },
  );
  // "cpu" is what ORT does anyway: accepted on every provider, and the output is readable.
  const s = await createSessionFromBytes(vae, [], { outputLocations: { sample: "cpu" } });
  try {
    const out = await s.run({
      latent_sample: floatTensor("float32", new Float32Array(4 * 4), [1, 4, 2, 2]),
    });
    strictEqual(isDeviceTensor(out.sample), false);
    releaseDeviceTensor(out.sample); // leaves a CPU tensor alone
    strictEqual(toFloat32(out.sample).length, 3 * 16 * 16);
  } finally {
    await s.release();
  }
});

Deno.test("a device tensor is never read back: toFloat32 says why instead of aborting the process", () => {
  // What ORT returns for an output left on the GPU (onnxruntime-common's gpu-buffer tensor);
  // reading it back (getData) would abort the process in onnxruntime-node 1.30.
  let disposed = 0;
  const onDevice = Tensor.fromGpuBuffer({} as never, {
    dataType: "float16",
    dims: [2, 77, 32],
    dispose: () => disposed++,
  });
  strictEqual(isDeviceTensor(onDevice), true);
  throws(() => toFloat32(onDevice), {
    message:
      "toFloat32: the float16 [2,77,32] tensor is on the device (gpu-buffer); only another session can read it, as a feed",
  });
  releaseDeviceTensor(onDevice);
  strictEqual(disposed, 1);
  strictEqual(onDevice.location, "none");
});
