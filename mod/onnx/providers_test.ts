import { match, ok, strictEqual } from "node:assert";
import {
  CUDA_INSTALL_COMMAND,
  ExecutionProviderError,
  explainProviderFailure,
  explainRunFailure,
  isNoFloat16,
} from "./providers.ts";

/** ONNX Runtime 1.30's own words, as measured on a machine without a GPU. */
const NO_ADAPTER =
  "/onnxruntime_src/onnxruntime/core/providers/webgpu/webgpu_context.cc:136 onnxruntime::webgpu::" +
  "WebGpuContext::Initialize(...) adapter_result.status == wgpu::RequestAdapterStatus::Success " +
  "was false. Failed to get a WebGPU adapter: No supported adapters";
const NO_F16 = "Non-zero status code returned while running Cast node. Name:'cast' Status " +
  "Message: shader_helper.cc:416 GenerateSourceCode Program Cast requires f16 but the device " +
  "does not support it.";
const CUDA = "OrtSessionOptionsAppendExecutionProvider_Cuda: Failed to load shared library";
const facts = { cudaLibrariesPresent: false, libraryDir: "/x/bin/napi-v6/linux/x64" };

Deno.test("explainProviderFailure: webgpu without an adapter names the missing driver, the check and the fall-back", () => {
  const text = explainProviderFailure("webgpu", NO_ADAPTER, facts);
  match(text, /^execution provider `webgpu` found no GPU: /);
  for (
    const needed of [
      "Vulkan loader (Debian/Ubuntu package libvulkan1)",
      "NVIDIA's proprietary driver",
      "Mesa's for AMD (radv) and Intel (anv)",
      "mesa-vulkan-drivers",
      "`vulkaninfo --summary`",
      '[runtime] execution_provider = "cpu"',
      "docs/gpu.md",
    ]
  ) ok(text.includes(needed), `${needed} in: ${text}`);
  // ORT's words come last, untouched.
  ok(text.endsWith(`ONNX Runtime said: ${NO_ADAPTER}`), text);
});

Deno.test("explainProviderFailure: cuda names the install command, the versions it needs and the folder", () => {
  const missing = explainProviderFailure("cuda", CUDA, facts);
  ok(missing.includes(`\`${CUDA_INSTALL_COMMAND}\``), missing);
  strictEqual(
    CUDA_INSTALL_COMMAND,
    "ONNXRUNTIME_NODE_INSTALL=cuda12 deno install --allow-scripts=npm:onnxruntime-node@1.30.0",
  );
  for (
    const needed of [
      "libonnxruntime_providers_cuda.so is not in /x/bin/napi-v6/linux/x64",
      "Microsoft.ML.OnnxRuntime.Gpu.Linux 1.30.0",
      "CUDA 12.x and cuDNN 9.x",
      'execution_provider = "webgpu"',
      '[runtime] execution_provider = "cpu"',
    ]
  ) ok(missing.includes(needed), `${needed} in: ${missing}`);
  // Installed, but the CUDA runtime is not there: a different cause, a different fix.
  const broken = explainProviderFailure("cuda", CUDA, { ...facts, cudaLibrariesPresent: true });
  match(broken, /although its provider libraries are installed/);
  match(broken, /libcudnn\.so\.9/);
  ok(!broken.includes(CUDA_INSTALL_COMMAND), broken);
});

Deno.test("explainProviderFailure: the CPU provider's failures pass through unchanged", () => {
  strictEqual(
    explainProviderFailure("cpu", "Protobuf parsing failed.", facts),
    "Protobuf parsing failed.",
  );
});

Deno.test("explainRunFailure: a WebGPU device without shader-f16 gets the fp32 set as the fix", () => {
  ok(isNoFloat16(NO_F16));
  const text = explainRunFailure("webgpu", NO_F16);
  match(text, /^the WebGPU adapter has no 16-bit float shaders \(WebGPU feature shader-f16/);
  ok(text.includes('[models] base = "sd15-fp32"'), text);
  ok(text.endsWith(`ONNX Runtime said: ${NO_F16}`), text);
  // Other failures, and the same text on another provider, are left alone.
  strictEqual(explainRunFailure("webgpu", "Got invalid dimensions"), "Got invalid dimensions");
  strictEqual(explainRunFailure("cpu", NO_F16), NO_F16);
});

Deno.test("ExecutionProviderError: the explanation alone, and the message with its context", () => {
  const e = new ExecutionProviderError("webgpu", "why", "unet: cannot create session");
  strictEqual(e.message, "unet: cannot create session: why");
  strictEqual(e.explanation, "why");
  strictEqual(e.provider, "webgpu");
  strictEqual(e.name, "ExecutionProviderError");
  strictEqual(new ExecutionProviderError("cuda", "why").message, "why");
});
