/**
 * The webgpu execution provider, end to end, in child processes (the Vulkan
 * loader reads its environment when a process starts):
 *
 * - on every machine, with no Vulkan driver (`NO_VULKAN_ENV`): a real ONNX
 *   Runtime session on the webgpu provider, the real server's start-up over
 *   stdio and `--check` fail with the cause (no GPU adapter), how to check it
 *   and the fix, before any tool is listed;
 * - where a software Vulkan driver is installed (Chromium's SwiftShader, see
 *   `helpers/vulkan.ts`; ignored elsewhere, the reason in the test name): the
 *   engine on webgpu with the hidden states and ControlNet residuals left on
 *   the GPU and freed, and image-to-image with the VAE encoder (opened from
 *   its rewritten bytes) returning its latent parameters to the CPU, against
 *   the CPU provider; the real server serving generate_image and
 *   transform_image on webgpu; an fp16 set, or only an fp16 VAE encoder, on
 *   a device without shader-f16 refused at start-up; `--check` naming the
 *   provider; the GPU measurement script (`bench/gpu.ts`) on the tiny
 *   set; and the ONNX Runtime Conv + Tanh fusion bug docs/gpu.md describes.
 *   SwiftShader renders on the CPU: these prove the path, not its speed.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { Client, StdioClientTransport } from "../mod/mcp/client_sdk.ts";
import { decodeImageInput, toRgbImage } from "../mod/image/mod.ts";
import type { GpuReport } from "../bench/gpu.ts";
import { teeChildLog } from "./helpers/log_secrets.ts";
import { ROOT } from "./helpers/paths.ts";
import { pngs, texts } from "./helpers/results.ts";
import { type TempConfig, writeTinyConfig } from "./helpers/tiny_config.ts";
import { NO_VULKAN_ENV, providerChild, softwareVulkan } from "./helpers/vulkan.ts";
import { ignoredFor } from "./helpers/ignore.ts";

const TINY = join(ROOT, "tests/fixtures/tiny/models");

/** Sets `[runtime] execution_provider` (and `[models] base`) in a tiny config. */
async function useProvider(temp: TempConfig, provider: string, base?: string): Promise<void> {
  let text = await Deno.readTextFile(temp.path);
  text = text.replace("[runtime]\n", `[runtime]\nexecution_provider = "${provider}"\n`);
  if (base) text = text.replace("[models]\n", `[models]\nbase = "${base}"\n`);
  await Deno.writeTextFile(temp.path, text);
}

/** Runs `deno run <args>` in the repository with `extra` added to the environment. */
async function denoRun(args: string[], extra: Record<string, string>, label: string) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", ...args],
    cwd: ROOT,
    env: { NO_COLOR: "1", ...extra },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stderr = new TextDecoder().decode(out.stderr);
  // The child's stderr joins the run's logs (checked for secrets like every server log).
  teeChildLog(label, stderr);
  return { code: out.code, stdout: new TextDecoder().decode(out.stdout), stderr };
}

/** Runs a child script of `tests/helpers` with `extra`; returns its one JSON line, parsed. */
// deno-lint-ignore no-explicit-any -- the child's JSON, checked field by field by each test
async function childJson(script: string, extra: Record<string, string>): Promise<any> {
  const out = await denoRun(
    ["-P=test", "--quiet", join(ROOT, "tests/helpers", script)],
    extra,
    script,
  );
  assert.equal(out.code, 0, out.stderr);
  return JSON.parse(out.stdout);
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

/**
 * Starts the real server on `provider` (and `base`) with `extra` in its environment, expecting
 * start-up to fail: no tool is ever listed (the error reply or the closed connection, whichever
 * comes first) and the process ends. Returns what it wrote to stderr.
 */
async function failedStart(
  provider: string,
  base: string | undefined,
  extra: Record<string, string>,
): Promise<string> {
  const temp = await writeTinyConfig();
  try {
    await useProvider(temp, provider, base);
    const server = await startServer(temp.path, extra);
    try {
      const listed = await server.client.listTools().then(
        (r) => `listed ${r.tools.length}`,
        (e: Error) => e.message,
      );
      assert.match(listed, /could not start its tools: |Connection closed/);
      await server.exited;
      const stderr = server.stderr();
      assert.match(stderr, /start-up failed: /);
      return stderr;
    } finally {
      await server.close();
    }
  } finally {
    await temp.remove();
  }
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
  const stderr = await failedStart("webgpu", undefined, NO_VULKAN_ENV);
  assertNoAdapterMessage(stderr);
  // Nothing was opened before the check: no model file is blamed.
  assert.doesNotMatch(stderr, /cannot load (text_encoder|unet)/);
});

const software = await softwareVulkan();
/** Why the software-Vulkan tests cannot run here, or undefined. */
const noDevice = "missing" in software ? software.missing : undefined;
/** Why the tests of a device without 16-bit floats cannot run here, or undefined. */
const noF16Gap = noDevice ??
  ("float16" in software && software.float16
    ? "the software Vulkan device computes float16, so nothing is refused"
    : undefined);
const env = "env" in software ? software.env : {};

Deno.test({
  ...ignoredFor(
    noDevice,
    `webgpu engine on a software Vulkan device: hidden states and residuals stay on the GPU, are freed, and match the CPU (text, guided, image-to-image)`,
  ),
  async fn() {
    const r = await childJson("webgpu_engine_child.ts", env);
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
    // Image-to-image: the hidden states as for text-to-image; the VAE encoder, opened from its
    // rewritten bytes on webgpu, ran once and returned its latent parameters to the CPU (the
    // sampling from them is JavaScript); the other modes never ran it.
    assert.equal(r.vaeEncoder, "rewritten");
    assert.equal(r.providers.vae_encoder, "webgpu");
    for (const [label, provider] of Object.entries(r.providers)) {
      assert.equal(provider, "webgpu", label);
    }
    assert.deepEqual(r.device.image, {
      outputs: ["text_encoder.last_hidden_state"],
      count: 1,
      freed: 1,
    });
    assert.deepEqual(r.encoder, { text: [], depth: [], image: ["cpu"] });
    // Forced back to the CPU: nothing on the GPU, and the same bytes.
    for (const k of ["text", "depth", "image"]) {
      assert.deepEqual(r.forcedDevice[k].outputs, [], k);
      assert.equal(r.plannedVsForced[k].maxDiff, 0, k);
    }
    // Against the CPU provider: within one grey level, and the control image and the input
    // image mattered.
    for (const k of ["text", "depth", "image"]) {
      assert.ok(r.plannedVsCpu[k].maxDiff <= 1, JSON.stringify(r.plannedVsCpu));
      assert.ok(r.plannedVsCpu[k].psnrDb > 60, JSON.stringify(r.plannedVsCpu));
    }
    assert.ok(r.textVsDepth.maxDiff > 10);
    assert.ok(r.textVsImage.maxDiff > 10, JSON.stringify(r.textVsImage));
  },
});

Deno.test({
  ...ignoredFor(
    noDevice,
    `stdio on a software Vulkan device: the real server starts on webgpu and serves generate_image and transform_image`,
  ),
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
        // Image-to-image from that image: the VAE encoder, rewritten in memory, on webgpu too.
        const transformed = await server.client.callTool(
          {
            name: "transform_image",
            arguments: {
              positive_prompt: "a small boat at dusk",
              input_image: png.toBase64(),
              size: "square_512",
            },
          },
          undefined,
          { timeout: 600_000 },
        );
        assert.equal(transformed.isError, undefined, texts(transformed));
        const [out] = pngs(transformed);
        const back = await toRgbImage(
          await decodeImageInput("input_image", out.toBase64()),
          512,
          512,
        );
        assert.ok(new Set(back.data).size > 16, "an image, not a flat fill");
        assert.ok(back.data.some((v, i) => v !== rgb.data[i]), "the image was transformed");
      } finally {
        await server.close();
      }
    } finally {
      await temp.remove();
    }
  },
});

Deno.test({
  ...ignoredFor(
    noF16Gap,
    `an fp16 set on a WebGPU device without shader-f16 is refused at start-up with the fp32 set as the fix`,
  ),
  async fn() {
    const stderr = await failedStart("webgpu", "sd15-fp16", env);
    assert.match(
      stderr,
      /sd15-fp16\/text_encoder\/model\.onnx \(text_encoder, fp16\): the WebGPU adapter has no 16-bit float shaders/,
    );
    assert.ok(stderr.includes('[models] base = "sd15-fp32"'), stderr);
  },
});

Deno.test({
  ...ignoredFor(
    noF16Gap,
    `an fp16 VAE encoder (opened from its rewritten bytes) on a device without shader-f16 is refused at start-up like every other model`,
  ),
  async fn() {
    const r = await childJson("fp16_encoder_child.ts", env);
    assert.equal(r.started, false, JSON.stringify(r));
    assert.equal(r.name, "ExecutionProviderError");
    assert.ok(
      r.message.startsWith(
        `${r.base}/vae_encoder/model.onnx (vae_encoder, fp16): the WebGPU adapter has no ` +
          "16-bit float shaders",
      ),
      r.message,
    );
    assert.ok(r.message.includes('[models] base = "sd15-fp32"'), r.message);
  },
});

Deno.test({
  ...ignoredFor(
    noDevice,
    `the GPU measurement script runs on the tiny set on webgpu and reports agreement with the CPU`,
  ),
  async fn() {
    const out = join(await Deno.makeTempDir({ prefix: "sd15-gpu-bench-" }), "gpu.json");
    try {
      const run = await denoRun(
        [
          "-P=test",
          "--quiet",
          "bench/gpu.ts",
          ...["--provider", "webgpu", "--runs", "1", "--steps", "2", "--agreement-steps", "2"],
          ...["--out", out],
        ],
        env,
        "gpu bench",
      );
      assert.equal(run.code, 0, run.stderr);
      const r = JSON.parse(await Deno.readTextFile(out)) as GpuReport;
      assert.equal(r.provider.provider, "webgpu");
      // The fp16 set where the device computes float16, else the fp32-I/O one.
      assert.equal(r.set.folder, r.provider.float16 ? "sd15-fp16" : "sd15");
      assert.equal(r.set.unetDtype, r.provider.float16 ? "float16" : "float32");
      for (const s of [r.components.textEncoderBatch2, r.components.unetStepBatch2]) {
        assert.equal(s.samples.length, 1);
        assert.ok(s.min > 0 && s.median >= s.min);
      }
      const bytes = r.provider.float16 ? 2 : 4;
      assert.equal(r.components.latentRoundTrip.bytesEachWay, 2 * 4 * 8 * 8 * bytes);
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
      const printed = JSON.parse(run.stdout.trim().split("\n").pop()!);
      assert.deepEqual(printed.agreement, JSON.parse(JSON.stringify(r.agreement)));
    } finally {
      await Deno.remove(join(out, ".."), { recursive: true });
    }
  },
});

Deno.test({
  ...ignoredFor(
    noDevice,
    `ONNX Runtime's fused Conv + Tanh on webgpu gives NaN from |x| = 89 at "all", not at "basic" (docs/gpu.md)`,
  ),
  async fn() {
    const r = await childJson("conv_tanh_child.ts", env);
    const expected = [0.5, -3, 44, 88, 89, -89, 100, 1000].map(Math.tanh);
    // Unfused: tanh as the CPU computes it, saturating to ±1.
    r.basic.forEach((v: number, i: number) => assert.ok(Math.abs(v - expected[i]) < 1e-6, `${i}`));
    // Fused: right below 89, NaN (null in JSON) from there. When an ONNX Runtime update fixes
    // this, this test fails: drop the section of docs/gpu.md and this test.
    r.all.slice(0, 4).forEach((v: number, i: number) =>
      assert.ok(Math.abs(v - expected[i]) < 1e-6)
    );
    assert.deepEqual(r.all.slice(4), [null, null, null, null]);
  },
});

Deno.test('--check with execution_provider = "webgpu" and no Vulkan driver exits 1 with the fix', async () => {
  const temp = await writeTinyConfig();
  try {
    await useProvider(temp, "webgpu");
    const out = await denoRun(
      ["-P=serve", "--quiet", "main.ts", "--check", "--config", temp.path],
      NO_VULKAN_ENV,
      "--check webgpu",
    );
    assert.equal(out.code, 1, out.stderr);
    assertNoAdapterMessage(out.stderr);
  } finally {
    await temp.remove();
  }
});

Deno.test({
  ...ignoredFor(
    noDevice,
    `--check on a software Vulkan device names the provider and whether it computes float16`,
  ),
  async fn() {
    const temp = await writeTinyConfig();
    try {
      await useProvider(temp, "webgpu", "sd15");
      const out = await denoRun(
        ["-P=serve", "--quiet", "main.ts", "--check", "--config", temp.path],
        env,
        "--check webgpu",
      );
      const stdout = out.stdout;
      assert.equal(out.code, 0, out.stderr);
      const float16 = "float16" in software && software.float16 ? "yes" : "no";
      assert.match(
        stdout,
        new RegExp(`^engine ok: .*; execution provider webgpu \\(float16: ${float16}\\)$`, "m"),
      );
    } finally {
      await temp.remove();
    }
  },
});
