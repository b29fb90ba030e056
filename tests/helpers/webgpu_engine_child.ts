/**
 * Child process of the webgpu engine test: runs the same text-to-image,
 * depth-guided and image-to-image generations (2 steps, the tiny fp32-I/O
 * set, whose VAE encoder is opened from its rewritten bytes) three ways, and
 * prints one JSON line:
 *
 * - on webgpu as the engine opens it: which outputs came back on the GPU,
 *   whether each of those was freed by the end of the generation, and where
 *   the VAE encoder's outputs came back (read in JavaScript: the CPU), and
 *   which provider each model's session was created on;
 * - on webgpu with every output forced back to the CPU;
 * - on the CPU provider.
 *
 * ```sh
 * deno run -P=test tests/helpers/webgpu_engine_child.ts
 * ```
 *
 * @module
 */

import { join } from "node:path";
import {
  createSession,
  createSessionFromBytes,
  type Feeds,
  isDeviceTensor,
  type Session,
  type Tensor,
} from "../../mod/onnx/mod.ts";
import { createEngine, type GenerationRequest, type ModelSession } from "../../mod/pipeline/mod.ts";
import { testPicture, tinyConfig } from "../../mod/pipeline/_testing.ts";
import { imageAgreement } from "../../bench/gpu.ts";
import { ROOT } from "./paths.ts";

const root = join(ROOT, "tests/fixtures/tiny/models");
const base = { positive: "a red kite", negative: "blurry", width: 64, height: 64, seed: 42 };
const requests: Record<string, GenerationRequest> = {
  text: { ...base, mode: "text_to_image" },
  depth: { ...base, mode: "guided_image", controlMode: "depth", image: testPicture(64, 64) },
  image: { ...base, mode: "image_to_image", image: testPicture(64, 64), strength: 0.75 },
};

/** Output tensors the sessions returned on the device, by model and output name. */
type Seen = Array<{ label: string; output: string; tensor: Tensor }>;

async function run(provider: "cpu" | "webgpu", forceCpuOutputs: boolean) {
  const config = {
    ...tinyConfig(root, { controlnets: { depth: 1 }, generation: { steps: 2 } }),
    imageToImage: { strengths: [] },
  };
  config.runtime.executionProvider = provider;
  const seen: Seen = [];
  /** Where the VAE encoder's outputs came back, one entry per output per run. */
  const encoderLocations: string[] = [];
  /** The execution provider each model's session was created on, by label. */
  const providers: Record<string, string> = {};
  const watch = (session: Session, label: string): ModelSession => {
    providers[label] = session.provider;
    return {
      inputs: session.inputs,
      outputs: session.outputs,
      async run(feeds: Feeds, names?: readonly string[]) {
        const out = await session.run(feeds, names);
        for (const [output, tensor] of Object.entries(out)) {
          if (label === "vae_encoder") encoderLocations.push(tensor.location);
          if (isDeviceTensor(tensor)) seen.push({ label, output, tensor });
        }
        return out;
      },
      release: () => session.release(),
    };
  };
  const placed = <T extends { outputLocations?: unknown }>(options: T): T => ({
    ...options,
    outputLocations: forceCpuOutputs ? undefined : options.outputLocations,
  });
  const engine = await createEngine(config, {
    openSession: async (path, options) =>
      watch(await createSession(path, placed(options)), options.label ?? path),
    // The VAE encoder, rewritten in memory (its export samples inside the graph).
    openBytes: async (model, options) =>
      watch(
        await createSessionFromBytes(model.bytes, model.externalData, placed(options)),
        options.label ?? model.path,
      ),
  });
  const images: Record<string, number[]> = {};
  const device: Record<string, { outputs: string[]; count: number; freed: number }> = {};
  const encoder: Record<string, string[]> = {};
  for (const [name, request] of Object.entries(requests)) {
    seen.length = 0;
    encoderLocations.length = 0;
    images[name] = Array.from((await engine.generate(request)).image.data);
    device[name] = {
      outputs: [...new Set(seen.map((s) => `${s.label}.${s.output}`))].sort(),
      count: seen.length,
      // onnxruntime-common sets a disposed tensor's location to "none".
      freed: seen.filter((s) => s.tensor.location === "none").length,
    };
    encoder[name] = [...encoderLocations];
  }
  const vaeEncoder = engine.info.vaeEncoder;
  await engine.release();
  return { images, device, encoder, vaeEncoder, providers };
}

const planned = await run("webgpu", false);
const forced = await run("webgpu", true);
const cpu = await run("cpu", false);
const compare = (a: number[], b: number[]) =>
  imageAgreement(Uint8Array.from(a), Uint8Array.from(b));
console.log(JSON.stringify({
  device: planned.device,
  forcedDevice: forced.device,
  encoder: planned.encoder,
  vaeEncoder: planned.vaeEncoder,
  providers: planned.providers,
  plannedVsForced: Object.fromEntries(
    Object.keys(requests).map((k) => [k, compare(planned.images[k], forced.images[k])]),
  ),
  plannedVsCpu: Object.fromEntries(
    Object.keys(requests).map((k) => [k, compare(cpu.images[k], planned.images[k])]),
  ),
  textVsDepth: compare(planned.images.text, planned.images.depth),
  textVsImage: compare(planned.images.text, planned.images.image),
}));
