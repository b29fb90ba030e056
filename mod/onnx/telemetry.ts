/**
 * No telemetry from ONNX Runtime. Its official builds collect trace events
 * and, on Linux and macOS, send them to Microsoft over HTTPS through the 1DS
 * SDK built into the library (on by default; docs/Privacy.md of
 * github.com/microsoft/onnxruntime: "Set `ORT_DISABLE_TELEMETRY=1` before
 * ONNX Runtime initializes. This prevents the uploader, events, and
 * persistent device identifier from being created for the process
 * lifetime"). A server that generates images on the user's own hardware has
 * no reason to call out, so the variable is set here, in the process
 * environment the library reads, before the binding is loaded (runtime.ts
 * imports this module first). A value the user set stands.
 *
 * @module
 */

/** The variable ONNX Runtime reads. */
export const ORT_TELEMETRY_ENV = "ORT_DISABLE_TELEMETRY";

try {
  if (Deno.env.get(ORT_TELEMETRY_ENV) === undefined) Deno.env.set(ORT_TELEMETRY_ENV, "1");
} catch {
  // No permission for the variable (a permission set without it): the user's environment decides.
}
