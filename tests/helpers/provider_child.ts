/**
 * Child process of the webgpu tests (`vulkan.ts`): runs the execution
 * provider check of `mod/onnx` and, given a model file, opens a real session
 * of it on the provider; prints one JSON line (`ChildReport`).
 *
 * ```sh
 * deno run -P=test tests/helpers/provider_child.ts webgpu [model.onnx]
 * ```
 *
 * @module
 */

import {
  checkExecutionProvider,
  createSession,
  type ExecutionProvider,
} from "../../mod/onnx/mod.ts";

function described(e: unknown): { name: string; message: string } {
  return e instanceof Error
    ? { name: e.name, message: e.message }
    : { name: "?", message: String(e) };
}

const [provider, model] = Deno.args as [ExecutionProvider, string | undefined];
const report: Record<string, unknown> = {};
try {
  const check = await checkExecutionProvider(provider);
  report.ok = true;
  report.float16 = check.float16;
} catch (e) {
  report.ok = false;
  Object.assign(report, described(e));
}
if (model) {
  try {
    const session = await createSession(model, { executionProvider: provider, label: "unet" });
    report.sessionInputs = session.inputs.map((i) => i.name);
    await session.release();
  } catch (e) {
    report.sessionError = described(e);
  }
}
console.log(JSON.stringify(report));
