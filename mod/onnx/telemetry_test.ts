import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** What ORT_DISABLE_TELEMETRY is once the ONNX Runtime door has loaded, in a fresh process. */
async function afterLoad(env: Record<string, string>): Promise<string> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      "--quiet",
      `await import(${JSON.stringify(`${ROOT}mod/onnx/runtime.ts`)}); ` +
      'console.log(Deno.env.get("ORT_DISABLE_TELEMETRY") ?? "(unset)")',
    ],
    cwd: ROOT,
    clearEnv: true,
    env: { PATH: Deno.env.get("PATH") ?? "", HOME: Deno.env.get("HOME") ?? "/", ...env },
    stdin: "null",
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  return new TextDecoder().decode(out.stdout).trim();
}

Deno.test("loading onnxruntime switches its telemetry off, unless the user chose", async () => {
  assert.equal(await afterLoad({}), "1");
  assert.equal(await afterLoad({ ORT_DISABLE_TELEMETRY: "0" }), "0");
});

Deno.test("the serve permissions may set the variable", async () => {
  const manifest = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`));
  assert.ok(manifest.permissions.serve.env.includes("ORT_DISABLE_TELEMETRY"));
});
