/**
 * `--check`: verifies what start-up would verify, then stops, so a deployment
 * (or a freshly compiled binary) can be tested without serving. The config
 * is already resolved (invalid configs fail in `loadConfig`); this checks the
 * model files against models.lock, loads every model into ONNX Runtime in the
 * inference Worker (the I/O contract checks, and proof that the onnxruntime
 * native library loads), and encodes one PNG (proof that sharp's libvips
 * loads). It opens no database and no port.
 *
 * @module
 */

import type { ResolvedConfig } from "../config/mod.ts";
import { encodePng } from "../image/mod.ts";
import { untilAborted, verifyConfiguredModels } from "../models/mod.ts";
import { createWorkerGenerator, engineConfigOf } from "../pipeline/mod.ts";

/**
 * Runs the checks in order and returns one line per passed check; rejects
 * with the first failure (an Error naming the file and the problem), or with
 * `signal`'s reason as soon as it aborts (a derived build in progress leaves
 * nothing behind, see `mod/models/unfinished.ts`).
 */
export async function checkSetup(
  config: ResolvedConfig,
  options: { signal?: AbortSignal } = {},
): Promise<string[]> {
  const { signal } = options;
  const lines = [
    `config ok: transport ${config.server.transport}, models in ${config.models.root}`,
  ];
  await untilAborted(verifyConfiguredModels(config, { signal }), signal);
  lines.push(`model files ok: sizes and sha256 match ${config.models.lock}`);
  // The same Worker the server starts (createGenerator), typed so its load report is readable.
  const starting = createWorkerGenerator({ config: engineConfigOf(config) });
  let handedOver = false;
  signal?.addEventListener("abort", () => {
    if (!handedOver) void starting.then((g) => g.close(), () => {});
  }, { once: true });
  const generator = await untilAborted(starting, signal);
  handedOver = true;
  try {
    const info = generator.info;
    const files = Object.keys(info.models).length;
    const controlnets = info.controlnets.length ? info.controlnets.join(", ") : "none";
    const provider = info.provider.name === "cpu"
      ? "cpu"
      : `${info.provider.name} (float16: ${info.provider.float16 ? "yes" : "no"})`;
    lines.push(
      `engine ok: ${files} ONNX models loaded (ControlNets: ${controlnets}); execution provider ` +
        provider,
    );
  } finally {
    await generator.close();
  }
  const png = await encodePng({ width: 1, height: 1, data: new Uint8Array(3) }, {});
  lines.push(`image codec ok: sharp encoded a ${png.length}-byte PNG`);
  return lines;
}
