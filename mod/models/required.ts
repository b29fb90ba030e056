/**
 * Which lock entries a configuration needs, and the check that every model
 * path the configuration names is pinned in models.lock.
 *
 * @module
 */

import { isAbsolute, relative, sep } from "node:path";
import { type LockEntry, LockError, type ModelComponent } from "./lock.ts";

/** Turns a path (absolute under `root`, or root-relative) into lock form ("a/b/c"). */
export function toLockPath(path: string, root: string): string {
  const rel = isAbsolute(path) ? relative(root, path) : path;
  return rel.split(sep).join("/").replace(/^(\.\/)+/, "");
}

/**
 * Throws a {@link LockError} listing every path that has no lock entry, as
 * `<path> is not in models.lock`. `paths` may be absolute (under `root`) or
 * relative to it; a path outside the root can never be locked.
 */
export function requireLocked(
  paths: readonly string[],
  entries: readonly LockEntry[],
  root: string,
  lockName = "models.lock",
): void {
  const locked = new Set(entries.map((e) => e.path));
  const missing: string[] = [];
  for (const p of paths) {
    const rel = toLockPath(p, root);
    if (rel.startsWith("../") || rel === ".." || isAbsolute(rel)) {
      missing.push(`${p} is outside the models root ${root}, so it is not in ${lockName}`);
    } else if (!locked.has(rel)) {
      missing.push(`${rel} is not in ${lockName}`);
    }
  }
  if (missing.length > 0) throw new LockError(missing.join("\n"));
}

/** The SD 1.5 base components every configuration needs. */
export const BASE_COMPONENTS: readonly ModelComponent[] = [
  "text_encoder",
  "unet",
  "vae_decoder",
  "vae_encoder",
  "tokenizer",
  "scheduler",
];

/** Which optional features are on (mirrors `[controlnet.*] enabled`). */
export interface EnabledFeatures {
  /** Depth-guided generation: ControlNet depth + depth estimator. */
  depth: boolean;
  /** Pose-guided generation: ControlNet openpose + DWPose detector/estimator. */
  openpose: boolean;
  /** Inpainting ControlNet. */
  inpaint: boolean;
  /** At least one LoRA in `[lora] files` (every `lora` lock entry is then needed). */
  lora?: boolean;
}

/** The components needed for the enabled features (base always included). */
export function componentsFor(features: EnabledFeatures): ModelComponent[] {
  const out: ModelComponent[] = [...BASE_COMPONENTS];
  if (features.depth || features.openpose || features.inpaint) out.push("controlnet_unet");
  if (features.depth) out.push("controlnet_depth", "depth");
  if (features.openpose) out.push("controlnet_openpose", "pose_detector", "pose_estimator");
  if (features.inpaint) out.push("controlnet_inpaint");
  if (features.lora) out.push("lora");
  return out;
}

/** The parts of the resolved config that name model files. */
export interface ModelPathsConfig {
  /** Absolute models root, SD 1.5 base folder and ControlNet UNet path. */
  models: {
    root: string;
    base: string;
    controlnetUnet: string;
    /** "tiny": the tiny VAE decoder is loaded too (and must be locked). */
    vaeDecoder?: "full" | "tiny";
    /** Absolute path of the tiny VAE decoder. */
    tinyVaeDecoder?: string;
  };
  /** Per-feature enable flags and absolute model paths. */
  controlnet: {
    depth: { enabled: boolean; model: string; preprocessor: string };
    openpose: { enabled: boolean; model: string; detector: string; estimator: string };
    inpaint: { enabled: boolean; model: string };
  };
  /** Configured LoRA files (absolute); absent = none. */
  lora?: { files: ReadonlyArray<{ path: string }> };
}

/** Files of the SD 1.5 base folder (diffusers ONNX layout) the server loads. */
export const BASE_FILES: readonly string[] = [
  "text_encoder/model.onnx",
  "unet/model.onnx",
  "vae_decoder/model.onnx",
  "vae_encoder/model.onnx",
  "tokenizer/vocab.json",
  "tokenizer/merges.txt",
  "scheduler/scheduler_config.json",
];

/**
 * The absolute model paths a configuration needs: the base folder's files,
 * plus the ControlNet UNet and each enabled ControlNet with its preprocessors,
 * and every configured LoRA file.
 * (External-data files such as `unet/weights.pb` are not named by the config;
 * they are covered by verifying every lock entry of the needed components.)
 */
export function configModelPaths(config: ModelPathsConfig): string[] {
  const cn = config.controlnet;
  const paths = BASE_FILES.map((f) => `${config.models.base}/${f}`);
  if (cn.depth.enabled || cn.openpose.enabled || cn.inpaint.enabled) {
    paths.push(config.models.controlnetUnet);
  }
  if (cn.depth.enabled) paths.push(cn.depth.model, cn.depth.preprocessor);
  if (cn.openpose.enabled) {
    paths.push(cn.openpose.model, cn.openpose.detector, cn.openpose.estimator);
  }
  if (cn.inpaint.enabled) paths.push(cn.inpaint.model);
  for (const f of config.lora?.files ?? []) paths.push(f.path);
  if (config.models.vaeDecoder === "tiny" && config.models.tinyVaeDecoder) {
    paths.push(config.models.tinyVaeDecoder);
  }
  return paths;
}

/** The enabled features of a configuration, for {@link componentsFor}. */
export function enabledFeatures(config: ModelPathsConfig): EnabledFeatures {
  return {
    depth: config.controlnet.depth.enabled,
    openpose: config.controlnet.openpose.enabled,
    inpaint: config.controlnet.inpaint.enabled,
    lora: (config.lora?.files.length ?? 0) > 0,
  };
}
