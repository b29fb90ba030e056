/**
 * What each execution provider needs on the machine, and what to tell the
 * user when it is missing: the cause in words, how to check it and how to fix
 * it or fall back, next to ONNX Runtime's own message. docs/gpu.md holds the
 * same facts with their sources.
 *
 * - `webgpu` is bundled in onnxruntime-node 1.30 for Linux x86-64 (Dawn,
 *   Vulkan backend, inside `libonnxruntime.so.1`): it needs only a Vulkan
 *   driver for the GPU. Without one, Dawn answers "Failed to get a WebGPU
 *   adapter" (onnxruntime `core/providers/webgpu/webgpu_context.cc`). A device
 *   without 16-bit float shaders (WebGPU's `shader-f16`) opens sessions but
 *   fails the first fp16 kernel with "requires f16 but the device does not
 *   support it" (`core/providers/webgpu/shader_helper.cc`).
 * - `cuda` is listed but not bundled: its provider libraries come from the
 *   package's install script (`script/install.js`, manifest `cuda12` in
 *   `script/install-metadata.js`), which downloads the NuGet package
 *   Microsoft.ML.OnnxRuntime.Gpu.Linux of the same version; they need CUDA
 *   12.x and cuDNN 9.x at run time (onnxruntime-node README, "CUDA v12";
 *   ONNX Runtime CUDA EP requirements).
 *
 * @module
 */

import type { ExecutionProvider } from "./session_options.ts";

/** The onnxruntime-node version whose facts this file states (deno.json's pin). */
export const ONNXRUNTIME_NODE_VERSION = "1.30.0";

/** Where the provider facts live for users (relative to the repository). */
const DOC = "docs/gpu.md";

/** The command that installs the CUDA provider libraries into the package (never run by tests). */
export const CUDA_INSTALL_COMMAND =
  `ONNXRUNTIME_NODE_INSTALL=cuda12 deno install --allow-scripts=npm:onnxruntime-node@${ONNXRUNTIME_NODE_VERSION}`;

/** The files that command adds next to `libonnxruntime.so.1`. */
export const CUDA_PROVIDER_LIBRARIES = [
  "libonnxruntime_providers_shared.so",
  "libonnxruntime_providers_cuda.so",
] as const;

/** Dawn found no GPU: no Vulkan loader, no Vulkan driver, or none it accepts. */
const NO_ADAPTER = /Failed to get a WebGPU adapter|No supported adapters|Couldn't load Vulkan/i;

/** A WebGPU kernel needed 16-bit floats on a device that has none. */
const NO_F16 = /requires f16 but the device does not support it/i;

/** A provider that cannot start, with the cause and the fix in its message. */
export class ExecutionProviderError extends Error {
  /** The provider that failed. */
  readonly provider: ExecutionProvider;
  /** The explanation alone (cause, check, fix, ORT's words), without what was being opened. */
  readonly explanation: string;

  /**
   * Creates the error. `explanation` is complete on its own; `context`
   * (e.g. "unet: cannot create session") is put in front of it in `message`.
   */
  constructor(
    provider: ExecutionProvider,
    explanation: string,
    context?: string,
    options?: ErrorOptions,
  ) {
    super(context ? `${context}: ${explanation}` : explanation, options);
    this.name = "ExecutionProviderError";
    this.provider = provider;
    this.explanation = explanation;
  }
}

/** What is known about the machine when a provider fails. */
export interface ProviderFacts {
  /**
   * Whether the CUDA provider libraries are next to `libonnxruntime.so.1`
   * (null: the folder could not be looked at, e.g. in a compiled binary).
   */
  cudaLibrariesPresent: boolean | null;
  /** The folder they belong in, for the message. */
  libraryDir: string | null;
}

/** The fall-back every message ends with. */
const FALLBACK = 'set [runtime] execution_provider = "cpu" to run on the CPU';

/** The sentence for a WebGPU device without 16-bit floats. */
export function noFloat16Text(): string {
  return "the WebGPU adapter has no 16-bit float shaders (WebGPU feature shader-f16; on Vulkan " +
    "it needs shaderFloat16 and 16-bit storage buffer access, listed by `vulkaninfo`), so fp16 " +
    'models cannot run on it: use an fp32 model set ([models] base = "sd15-fp32", ' +
    `docs/models.md), update the GPU driver, or ${FALLBACK} (${DOC})`;
}

/** The sentence for a machine where Dawn finds no GPU. */
export function noAdapterText(): string {
  return "execution provider `webgpu` found no GPU: ONNX Runtime's WebGPU provider reaches the " +
    "GPU through Vulkan on Linux, and no Vulkan driver answered. It needs the Vulkan loader " +
    "(Debian/Ubuntu package libvulkan1) and the GPU vendor's Vulkan driver: NVIDIA's " +
    "proprietary driver for NVIDIA, Mesa's for AMD (radv) and Intel (anv), both in the package " +
    "mesa-vulkan-drivers. Check with `vulkaninfo --summary` " +
    "(package vulkan-tools): the GPU must be listed as a device (a llvmpipe entry is a CPU " +
    "renderer). In a container, pass the GPU device and the driver's ICD file in. Or " +
    `${FALLBACK} (${DOC})`;
}

/** The sentence for a missing CUDA provider library set. */
function cudaMissingText(facts: ProviderFacts): string {
  const where = facts.libraryDir
    ? ` (${CUDA_PROVIDER_LIBRARIES[1]} is not in ${facts.libraryDir})`
    : "";
  return "execution provider `cuda` needs ONNX Runtime's CUDA provider libraries, which " +
    `onnxruntime-node ${ONNXRUNTIME_NODE_VERSION} does not bundle${where}. Install them once, ` +
    `in the server's folder: \`${CUDA_INSTALL_COMMAND}\` (the package's install script ` +
    `downloads Microsoft.ML.OnnxRuntime.Gpu.Linux ${ONNXRUNTIME_NODE_VERSION} from ` +
    "api.nuget.org); at run time they need the NVIDIA driver with CUDA 12.x and cuDNN 9.x " +
    'libraries on the library path. Or use execution_provider = "webgpu" (bundled; needs only ' +
    `a Vulkan driver), or ${FALLBACK} (${DOC})`;
}

/** The sentence for installed CUDA provider libraries that still do not start. */
function cudaBrokenText(): string {
  return "execution provider `cuda` could not start although its provider libraries are " +
    "installed: it needs the NVIDIA driver (`nvidia-smi` must list the GPU) and the CUDA 12.x " +
    "and cuDNN 9.x libraries (libcudart.so.12, libcublas.so.12, libcudnn.so.9) on the library " +
    "path, e.g. LD_LIBRARY_PATH; ONNX Runtime's log line above names the library it could not " +
    `load. Or use execution_provider = "webgpu", or ${FALLBACK} (${DOC})`;
}

/**
 * Explains why a session could not be created with `provider`: the cause,
 * how to check it and the fix, then ONNX Runtime's own words. The CPU
 * provider's failures (a broken model file) are returned as they are.
 */
export function explainProviderFailure(
  provider: ExecutionProvider,
  ortMessage: string,
  facts: ProviderFacts,
): string {
  if (provider === "cpu") return ortMessage;
  let text: string;
  if (provider === "webgpu" && NO_ADAPTER.test(ortMessage)) {
    text = noAdapterText();
  } else if (provider === "webgpu" && NO_F16.test(ortMessage)) {
    text = noFloat16Text();
  } else if (provider === "cuda" && facts.cudaLibrariesPresent !== true) {
    text = cudaMissingText(facts);
  } else if (provider === "cuda") {
    text = cudaBrokenText();
  } else {
    text = `execution provider \`${provider}\` could not start: ${FALLBACK} (${DOC})`;
  }
  return `${text}. ONNX Runtime said: ${ortMessage.trim()}`;
}

/**
 * Adds the cause and the fix to a failed run when it is a provider's, not
 * the model's: today only a WebGPU device without 16-bit floats. Other
 * messages are returned unchanged.
 */
export function explainRunFailure(provider: ExecutionProvider, ortMessage: string): string {
  if (provider === "webgpu" && NO_F16.test(ortMessage)) {
    return `${noFloat16Text()}. ONNX Runtime said: ${ortMessage.trim()}`;
  }
  return ortMessage;
}

/** Whether ONNX Runtime's message says the WebGPU device lacks 16-bit floats. */
export function isNoFloat16(message: string): boolean {
  return NO_F16.test(message);
}
