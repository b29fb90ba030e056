/**
 * Vulkan environments for the webgpu tests, which run in child processes
 * (the Vulkan loader reads them when the process starts):
 *
 * - {@link NO_VULKAN_ENV}: no Vulkan driver at all, whatever the machine
 *   has, so the no-adapter path runs everywhere;
 * - {@link softwareVulkan}: a CPU-only Vulkan driver that Dawn (ONNX
 *   Runtime's WebGPU) accepts, so the whole webgpu path runs without a GPU.
 *   Chromium (Debian's `chromium` package) ships one: SwiftShader, with its
 *   own Vulkan loader, in `/usr/lib/chromium`. Mesa's lavapipe from Debian 12
 *   (`mesa-vulkan-drivers` 22.3) is not one: Dawn rejects it ("Vulkan
 *   shaderUniform*ArrayDynamicIndexing required"). `SD15_TEST_VULKAN_ICD`
 *   names another driver manifest (its folder is put on the library path).
 *
 * @module
 */

import { dirname, join } from "node:path";
import { ROOT } from "./paths.ts";

/** Points the Vulkan loader at a driver manifest that does not exist: no adapter. */
export const NO_VULKAN_ENV: Record<string, string> = {
  VK_DRIVER_FILES: "/nonexistent/no-vulkan-driver.json",
  VK_ICD_FILENAMES: "/nonexistent/no-vulkan-driver.json",
};

/** Chromium's SwiftShader Vulkan driver manifest (Debian's `chromium` package). */
const SWIFTSHADER_ICD = "/usr/lib/chromium/vk_swiftshader_icd.json";

/** A software Vulkan driver Dawn accepts, or why there is none. */
export type SoftwareVulkan =
  | { env: Record<string, string>; icd: string; float16: boolean }
  | { missing: string };

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

/**
 * Finds the software Vulkan driver and checks, in a child process, that the
 * webgpu provider starts on it (and whether it computes float16).
 */
export async function softwareVulkan(): Promise<SoftwareVulkan> {
  const icd = Deno.env.get("SD15_TEST_VULKAN_ICD") ?? SWIFTSHADER_ICD;
  if (!await exists(icd)) {
    return {
      missing: `no software Vulkan driver at ${icd} (install Debian's chromium for SwiftShader, ` +
        "or set SD15_TEST_VULKAN_ICD)",
    };
  }
  const libraryPath = [dirname(icd), Deno.env.get("LD_LIBRARY_PATH")].filter(Boolean).join(":");
  const env = { VK_DRIVER_FILES: icd, VK_ICD_FILENAMES: icd, LD_LIBRARY_PATH: libraryPath };
  const check = await providerChild("webgpu", env);
  if (!check.ok) return { missing: `${icd} is there but webgpu does not start: ${check.message}` };
  return { env, icd, float16: check.float16 };
}

/** What the provider child reported. */
export type ChildReport =
  | { ok: true; float16: boolean; sessionInputs?: string[] }
  | { ok: false; name: string; message: string; sessionError?: { name: string; message: string } };

/**
 * Runs `tests/helpers/provider_child.ts` with `env`: the provider check, and
 * (with `model`) a session of that model file on the provider.
 */
export async function providerChild(
  provider: string,
  env: Record<string, string>,
  model?: string,
): Promise<ChildReport> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-P=test",
      "--quiet",
      join(ROOT, "tests/helpers/provider_child.ts"),
      provider,
      ...(model ? [model] : []),
    ],
    cwd: ROOT,
    env: { NO_COLOR: "1", ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout).trim();
  if (!out.success) {
    throw new Error(`provider child exited ${out.code}: ${new TextDecoder().decode(out.stderr)}`);
  }
  return JSON.parse(text) as ChildReport;
}
