/**
 * The webgpu execution provider, end to end, in child processes (the Vulkan
 * loader reads its environment when a process starts):
 *
 * - on every machine, with no Vulkan driver (`NO_VULKAN_ENV`): a real ONNX
 *   Runtime session on the webgpu provider, and the real server's start-up
 *   over stdio, fail with the cause (no GPU adapter), how to check it and the
 *   fix, before any tool is listed;
 * - where a software Vulkan driver is installed (Chromium's SwiftShader, see
 *   `helpers/vulkan.ts`; ignored elsewhere, the reason in the test name): the
 *   engine on webgpu with the hidden states and ControlNet residuals left on
 *   the GPU and freed, against the CPU provider; the real server serving
 *   generate_image on webgpu; an fp16 set on a device without shader-f16
 *   refused at start-up; and the GPU measurement script (`mod/bench/gpu.ts`)
 *   on the tiny set. SwiftShader renders on the CPU: these prove the path,
 *   not its speed.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { Client, StdioClientTransport } from "../mod/mcp/sdk.ts";
import { decodeImageInput, toRgbImage } from "../mod/image/mod.ts";
import type { GpuReport } from "../mod/bench/gpu.ts";
import { teeChildLog } from "./helpers/log_secrets.ts";
import { ROOT } from "./helpers/paths.ts";
import { pngs, texts } from "./helpers/results.ts";
import { type TempConfig, writeTinyConfig } from "./helpers/tiny_config.ts";
import { NO_VULKAN_ENV, providerChild, softwareVulkan } from "./helpers/vulkan.ts";

const TINY = join(ROOT, "tests/fixtures/tiny/models");

/** Sets `[runtime] execution_provider` (and `[models] base`) in a tiny config. */
async function useProvider(temp: TempConfig, provider: string, base?: string): Promise<void> {
  let text = await Deno.readTextFile(temp.path);
  text = text.replace("[runtime]\n", `[runtime]\nexecution_provider = "${provider}"\n`);
  if (base) text = text.replace("[models]\n", `[models]\nbase = "${base}"\n`);
  await Deno.writeTextFile(temp.path, text);
}

/** Starts the real server over stdio with `env` added; returns the client and its stderr. */
async function startServer(config: string, env: Record<string, string>) {
  const transport = new StdioClientTransport({
    command: Deno.execPath(),
    args: ["run", "-P=serve", "--quiet", "main.ts", "--config", config],
    cwd: ROOT,
    env: { ...Deno.env.toObject(), NO_COLOR: "1", ...env },
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (c: Uint8Array) => stderr += new TextDecoder().decode(c));
  const exited = new Promise<void>((r) => transport.onclose = () => r());
  const client = new Client({ name: "webgpu-test", version: "1" });
  await client.connect(transport);
  return {
    client,
    exited,
    stderr: () => stderr,
    async close() {
      await client.close();
      teeChildLog("webgpu server", stderr);
    },
  };
}

/** What every no-adapter message must carry: the cause, the check, the driver, the fall-back. */
function assertNoAdapterMessage(text: string): void {
  assert.match(text, /execution provider `webgpu` found no GPU/);
  for (
    const needed of [
      "libvulkan1",
      "NVIDIA's proprietary driver",
      "mesa-vulkan-drivers",
      "`vulkaninfo --summary`",
      '[runtime] execution_provider = "cpu"',
      "Failed to get a WebGPU adapter",
    ]
  ) assert.ok(text.includes(needed), `${needed} in: ${text}`);
}

Deno.test("webgpu without a Vulkan driver: a real session fails with the cause, the check and the fix", async () => {
  const report = await providerChild(
    "webgpu",
    NO_VULKAN_ENV,
    join(TINY, "sd15/unet/model.onnx"),
  );
  assert.equal(report.ok, false, JSON.stringify(report));
  if (report.ok) return;
  // The start-up check: the explanation alone, no model named.
  assert.equal(report.name, "ExecutionProviderError");
  assert.match(report.message, /^execution provider `webgpu` found no GPU: /);
  assertNoAdapterMessage(report.message);
  // A session of a real model: the same explanation behind the model's label.
  assert.equal(report.sessionError?.name, "ExecutionProviderError");
  assert.match(report.sessionError!.message, /^unet: cannot create session: execution provider/);
  assertNoAdapterMessage(report.sessionError!.message);
});

Deno.test('stdio: execution_provider = "webgpu" without a Vulkan driver fails start-up before any tool, with the fix', async () => {
  const temp = await writeTinyConfig();
  try {
    await useProvider(temp, "webgpu");
    const server = await startServer(temp.path, NO_VULKAN_ENV);
    try {
      const listed = await server.client.listTools().then(
        (r) => `listed ${r.tools.length}`,
        (e: Error) => e.message,
      );
      // The error reply or the closed connection, whichever comes first: never a tool.
      assert.match(listed, /could not start its tools: .*found no GPU|Connection closed/s);
      await server.exited;
      const stderr = server.stderr();
      assert.match(stderr, /start-up failed: /);
      assertNoAdapterMessage(stderr);
      // Nothing was opened before the check: no model file is blamed.
      assert.doesNotMatch(stderr, /cannot load (text_encoder|unet)/);
    } finally {
      await server.close();
    }
  } finally {
    await temp.remove();
  }
});

const software = await softwareVulkan();
const ignore = "missing" in software;
const why = ignore ? ` [ignored: ${software.missing}]` : "";
const env = "env" in software ? software.env : {};

Deno.test({
  name:
    `webgpu engine on a software Vulkan device: hidden states and residuals stay on the GPU, are freed, and match the CPU${why}`,
  ignore,
  async fn() {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-P=test", "--quiet", join(ROOT, "tests/helpers/webgpu_engine_child.ts")],
      cwd: ROOT,
      env,
      stdout: "piped",
      stderr: "piped",
    }).output();
    teeChildLog("webgpu engine child", out.stderr);
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    const r = JSON.parse(new TextDecoder().decode(out.stdout));
    // Text-to-image: the text encoder's hidden states came back on the GPU, once, and were freed.
    assert.deepEqual(r.device.text, {
      outputs: ["text_encoder.last_hidden_state"],
      count: 1,
      freed: 1,
    });
    // Guided: plus the ControlNet's 13 residuals at every UNet call, each freed after its step.
    const residuals = r.device.depth.outputs.filter((o: string) => o.startsWith("controlnet."));
    assert.equal(residuals.length, 13);
    assert.equal((r.device.depth.count - 1) % 13, 0);
    assert.ok(r.device.depth.count > 13);
    assert.equal(r.device.depth.freed, r.device.depth.count);
    // Forced back to the CPU: nothing on the GPU, and the same bytes.
    assert.deepEqual(r.forcedDevice.text.outputs, []);
    assert.deepEqual(r.forcedDevice.depth.outputs, []);
    assert.equal(r.plannedVsForced.text.maxDiff, 0);
    assert.equal(r.plannedVsForced.depth.maxDiff, 0);
    // Against the CPU provider: within one grey level, and the control image mattered.
    for (const k of ["text", "depth"]) {
      assert.ok(r.plannedVsCpu[k].maxDiff <= 1, JSON.stringify(r.plannedVsCpu));
      assert.ok(r.plannedVsCpu[k].psnrDb > 60, JSON.stringify(r.plannedVsCpu));
    }
    assert.ok(r.textVsDepth.maxDiff > 10);
  },
});

Deno.test({
  name:
    `stdio on a software Vulkan device: the real server starts on webgpu and serves generate_image${why}`,
  ignore,
  async fn() {
    // The fp32-I/O set (a software device may lack shader-f16); wait for the image however long
    // the software renderer takes (its 512×512 decode is slow: the point is the path, not speed).
    const temp = await writeTinyConfig(`[generation]\nsteps = 2\nseed = 7\nmax_wait_seconds = 0\n`);
    try {
      await useProvider(temp, "webgpu", "sd15");
      const server = await startServer(temp.path, env);
      try {
        const result = await server.client.callTool(
          {
            name: "generate_image",
            arguments: { positive_prompt: "a small boat", size: "square_512" },
          },
          undefined,
          { timeout: 600_000 },
        );
        assert.equal(result.isError, undefined, texts(result));
        const [png] = pngs(result);
        const decoded = await decodeImageInput("input_image", png.toBase64());
        assert.deepEqual([decoded.width, decoded.height], [512, 512]);
        const rgb = await toRgbImage(decoded, 512, 512);
        assert.ok(new Set(rgb.data).size > 16, "an image, not a flat fill");
        assert.match(server.stderr(), /execution provider ready.*"provider":"webgpu"/);
      } finally {
        await server.close();
      }
    } finally {
      await temp.remove();
    }
  },
});

Deno.test({
  name:
    `an fp16 set on a WebGPU device without shader-f16 is refused at start-up with the fp32 set as the fix${why}`,
  ignore: ignore || ("float16" in software && software.float16),
  async fn() {
    const temp = await writeTinyConfig();
    try {
      await useProvider(temp, "webgpu", "sd15-fp16");
      const server = await startServer(temp.path, env);
      try {
        const listed = await server.client.listTools().then(
          () => "listed",
          (e: Error) => e.message,
        );
        assert.match(listed, /could not start its tools|Connection closed/);
        await server.exited;
        const stderr = server.stderr();
        assert.match(
          stderr,
          /sd15-fp16\/text_encoder\/model\.onnx \(text_encoder, fp16\): the WebGPU adapter has no 16-bit float shaders/,
        );
        assert.ok(stderr.includes('[models] base = "sd15-fp32"'), stderr);
      } finally {
        await server.close();
      }
    } finally {
      await temp.remove();
    }
  },
});

Deno.test({
  name:
    `the GPU measurement script runs on the tiny set on webgpu and reports agreement with the CPU${why}`,
  ignore,
  async fn() {
    const out = join(await Deno.makeTempDir({ prefix: "sd15-gpu-bench-" }), "gpu.json");
    try {
      const run = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-P=test",
          "--quiet",
          "mod/bench/gpu.ts",
          "--provider",
          "webgpu",
          "--runs",
          "1",
          "--steps",
          "2",
          "--agreement-steps",
          "2",
          "--out",
          out,
        ],
        cwd: ROOT,
        env,
        stdout: "piped",
        stderr: "piped",
      }).output();
      teeChildLog("gpu bench", run.stderr);
      assert.equal(run.code, 0, new TextDecoder().decode(run.stderr));
      const r = JSON.parse(await Deno.readTextFile(out)) as GpuReport;
      assert.equal(r.provider.provider, "webgpu");
      // The fp16 set where the device computes float16, else the fp32-I/O one.
      assert.equal(r.set.folder, r.provider.float16 ? "sd15-fp16" : "sd15");
      assert.equal(r.set.unetDtype, r.provider.float16 ? "float16" : "float32");
      for (const s of [r.components.textEncoderBatch2, r.components.unetStepBatch2]) {
        assert.equal(s.samples.length, 1);
        assert.ok(s.min > 0 && s.median >= s.min);
      }
      assert.equal(r.components.latentRoundTrip.bytesEachWay, 2 * 4 * 8 * 8 * 4);
      assert.equal(r.images.defaultPreset.totalMs.length, 1);
      assert.equal(r.images.fastPreset.steps, 4);
      assert.ok("unavailable" in r.gpuMemory || r.gpuMemory.peakMiB >= 0);
      const a = r.agreement!;
      assert.equal(a.noisePrediction.nonFinite, 0);
      assert.ok(a.noisePrediction.maxRel < 1e-3, JSON.stringify(a));
      assert.ok(a.noisePrediction.refMaxAbs > 0.1, "the noise prediction is not all zeros");
      assert.ok(a.image.maxDiff <= 2, JSON.stringify(a));
      assert.equal(a.image.steps, 2);
      // The same report on stdout.
      const printed = JSON.parse(new TextDecoder().decode(run.stdout).trim().split("\n").pop()!);
      assert.deepEqual(printed.agreement, JSON.parse(JSON.stringify(r.agreement)));
    } finally {
      await Deno.remove(join(out, ".."), { recursive: true });
    }
  },
});
