/**
 * Writes a full-size SD 1.5 model set for `deno task bench --full` into a
 * cache folder outside the repository (default
 * `~/.cache/generate-image-sd15-mcp/`, `$SD_MCP_BENCH_CACHE` overrides):
 * the diffusers-script layout (`text_encoder/`, `unet/` + `weights.pb`,
 * `vae_decoder/`, `vae_encoder/`, `tokenizer/`, `scheduler/`), the TAESD-structure tiny
 * decoder (`taesd/vae_decoder/model.onnx`), fp32 or fp16, and a models.lock
 * with the files' real sizes and sha256. Random weights from a seed
 * (`tests/fixtures/builder/sd15_full.ts`); a stamp skips the rebuild while the
 * builder, seed and options are unchanged.
 *
 * @module
 */

import { join } from "node:path";
import { log } from "../mod/log/mod.ts";
import {
  buildFullControlNet,
  buildFullTextEncoder,
  buildFullUnet,
  buildFullVaeDecoder,
  buildFullVaeEncoder,
  buildTaesdDecoder,
  buildTinyLora,
  type FullModel,
  lcmLoraModules,
  SCHEDULER_CONFIG_JSON,
  TAESD_CHANNELS,
  TINY_VAE_DECODER_PATH,
} from "../tests/fixtures/builder/mod.ts";
import { sha256File } from "../mod/bytes/mod.ts";
import { writeClipTokenizerFiles } from "../mod/tokenizer/mod.ts";

/**
 * Version of the full-size graphs and the set layout, in the stamp: bump it
 * when `sd15_full.ts` or this file changes what is written (the tiny set's
 * `BUILDER_VERSION` is not used, so a change to the test fixtures does not
 * rewrite gigabytes of bench models).
 */
export const FULL_SET_VERSION = 5;

/** Options of {@link buildFullSet}. */
export interface FullSetOptions {
  /** Weight precision of the files. */
  precision: "fp32" | "fp16";
  /** UNet ResNets per block: 2 = SD 1.5; 1 = the reduced-depth development variant. */
  layersPerBlock?: number;
  /** Weight seed; default 1234. */
  seed?: number;
}

/** One written file. */
export interface FullSetFile {
  /** Path relative to the set's root. */
  path: string;
  /** Lock component. */
  component: string;
  /** Bytes. */
  size: number;
  /** sha256 hex. */
  sha256: string;
}

/** A written set. */
export interface FullSet {
  /** The models root (holds `sd15/`, `taesd/` and `models.lock`). */
  root: string;
  /** Every file, with sizes and hashes. */
  files: FullSetFile[];
  /** Parameters per model, next to the real counts. */
  params: Record<string, number>;
  /** True when the stamp matched and nothing was written. */
  reused: boolean;
}

/** The bench cache folder (outside the repository). */
export function benchCacheDir(): string {
  const override = Deno.env.get("SD_MCP_BENCH_CACHE");
  if (override) return override;
  return join(Deno.env.get("HOME") ?? "/tmp", ".cache", "generate-image-sd15-mcp");
}

/** Writes (or reuses) the full-size set for `options`; returns its root. */
export async function buildFullSet(options: FullSetOptions): Promise<FullSet> {
  const seed = options.seed ?? 1234;
  const lpb = options.layersPerBlock ?? 2;
  const name = `sd15-full-${options.precision}${lpb === 2 ? "" : `-lpb${lpb}`}`;
  const root = join(benchCacheDir(), name);
  const stamp = JSON.stringify({
    builder: FULL_SET_VERSION,
    full: 1,
    seed,
    lpb,
    p: options.precision,
  });
  const stampPath = join(root, ".stamp.json");
  const previous = await Deno.readTextFile(stampPath).catch(() => "");
  if (previous.startsWith(stamp)) {
    const saved = JSON.parse(previous.slice(stamp.length)) as Omit<FullSet, "reused" | "root">;
    return { root, ...saved, reused: true };
  }
  await Deno.remove(root, { recursive: true }).catch(() => {});
  const fp16 = options.precision === "fp16";
  const files: FullSetFile[] = [];
  const params: Record<string, number> = {};
  const add = async (path: string, component: string) => {
    const abs = join(root, path);
    files.push({
      path,
      component,
      size: (await Deno.stat(abs)).size,
      sha256: await sha256File(abs),
    });
  };
  const write = async (dir: string, component: string, m: FullModel, location: string) => {
    await Deno.mkdir(join(root, dir), { recursive: true });
    const started = performance.now();
    m.graph.writeFiles(join(root, dir, "model.onnx"), {
      opset: 17,
      externalData: { location, minBytes: 1024 },
      float16: fp16,
      docString: `full-size SD 1.5 ${component} (random weights, seed ${seed})`,
    });
    params[component] = m.params;
    await add(`${dir}/model.onnx`, component);
    await add(`${dir}/${location}`, component);
    log("info", "bench", `wrote ${component}`, {
      ms: Math.round(performance.now() - started),
      params: m.params,
    });
  };
  await write("sd15/text_encoder", "text_encoder", buildFullTextEncoder(seed), "model.onnx_data");
  await write("sd15/unet", "unet", buildFullUnet(seed, { layersPerBlock: lpb }), "weights.pb");
  await write("sd15/vae_decoder", "vae_decoder", buildFullVaeDecoder(seed), "model.onnx_data");
  const taesd = buildTaesdDecoder(seed, TAESD_CHANNELS);
  await Deno.mkdir(join(root, "taesd/vae_decoder"), { recursive: true });
  await Deno.writeFile(join(root, TINY_VAE_DECODER_PATH), taesd.model);
  await add(TINY_VAE_DECODER_PATH, "vae_decoder");
  params.taesd_decoder = 1_222_531;
  await writeClipTokenizerFiles(join(root, "sd15/tokenizer"));
  await add("sd15/tokenizer/vocab.json", "tokenizer");
  await add("sd15/tokenizer/merges.txt", "tokenizer");
  await Deno.mkdir(join(root, "sd15/scheduler"), { recursive: true });
  await Deno.writeTextFile(
    join(root, "sd15/scheduler/scheduler_config.json"),
    SCHEDULER_CONFIG_JSON,
  );
  await add("sd15/scheduler/scheduler_config.json", "scheduler");
  // The server opens (and rewrites, mod/onnx vae_encoder_graph.ts) the VAE encoder for
  // image-to-image and upscaling: the full-size one, sampling in the graph as the diffusers
  // script's export does.
  await write("sd15/vae_encoder", "vae_encoder", buildFullVaeEncoder(seed), "model.onnx_data");
  await Deno.writeTextFile(join(root, "models.lock"), lockText(files));
  const saved = { files, params };
  await Deno.writeTextFile(stampPath, stamp + JSON.stringify(saved));
  return { root, ...saved, reused: false };
}

function lockText(files: readonly FullSetFile[]): string {
  return files.map((f) =>
    `[[file]]\ncomponent = "${f.component}"\npath = "${f.path}"\n` +
    `url = "fixture://bench/${f.path}"\nsize = ${f.size}\nsha256 = "${f.sha256}"\n`
  ).join("\n");
}

/** What {@link buildFullExtras} adds to a set (paths relative to its root). */
export interface FullExtras {
  /** The residual UNet (`[models] controlnet_unet`). */
  controlnetUnet: string;
  /** The depth ControlNet. */
  controlnet: string;
  /** A LoRA shaped like the published SD 1.5 LCM LoRA (kohya keys, rank 64, fp16). */
  lora: string;
  /** Parameters of each model, and the LoRA's size in bytes. */
  params: Record<string, number>;
  /** True when the stamp matched and nothing was written. */
  reused: boolean;
}

/**
 * Adds the guided-generation models and an LCM-shaped LoRA to `set` (only the
 * scenarios that use them pay the 5 GB): the full-size residual UNet and
 * depth ControlNet (`sd15_full.ts`), and a LoRA over the UNet modules an LCM
 * LoRA adapts, with the published file's shapes (rank 64, fp16), so its merge
 * at start-up costs what the real one's does. Random weights; own stamp.
 */
export async function buildFullExtras(set: FullSet, seed = 1234): Promise<FullExtras> {
  const out = {
    controlnetUnet: "sd15/controlnet_unet/model.onnx",
    controlnet: "controlnet/depth.onnx",
    lora: "lora/lcm-shaped/pytorch_lora_weights.safetensors",
  };
  const stamp = JSON.stringify({ builder: FULL_SET_VERSION, extras: 1, seed });
  const stampPath = join(set.root, ".extras.json");
  const previous = await Deno.readTextFile(stampPath).catch(() => "");
  if (previous.startsWith(stamp)) {
    return { ...out, params: JSON.parse(previous.slice(stamp.length)), reused: true };
  }
  const params: Record<string, number> = {};
  const write = async (path: string, component: string, m: FullModel, location: string) => {
    const dir = join(set.root, path.slice(0, path.lastIndexOf("/")));
    await Deno.mkdir(dir, { recursive: true });
    const started = performance.now();
    m.graph.writeFiles(join(set.root, path), {
      opset: 17,
      externalData: { location, minBytes: 1024 },
      docString: `full-size SD 1.5 ${component} (random weights, seed ${seed})`,
    });
    params[component] = m.params;
    log("info", "bench", `wrote ${component}`, {
      ms: Math.round(performance.now() - started),
      params: m.params,
    });
  };
  await write(
    out.controlnetUnet,
    "controlnet_unet",
    buildFullUnet(seed, { residuals: true }),
    "weights.pb",
  );
  await write(out.controlnet, "controlnet_depth", buildFullControlNet(seed), "depth.onnx_data");
  // The LoRA: modules and shapes of the UNet's LCM targets; small values (timing, not images).
  const modules = lcmLoraModules(buildFullUnet(seed));
  const lora = buildTinyLora(seed, { modules, rank: 64, alpha: 64, scale: 0.001, targets: "unet" });
  await Deno.mkdir(join(set.root, "lora/lcm-shaped"), { recursive: true });
  await Deno.writeFile(join(set.root, out.lora), lora);
  params.lora_modules = modules.length;
  params.lora_bytes = lora.length;
  await Deno.writeTextFile(stampPath, stamp + JSON.stringify(params));
  return { ...out, params, reused: false };
}
