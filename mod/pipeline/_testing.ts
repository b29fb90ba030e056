/**
 * Test support for the pipeline tests: the tiny model set built by
 * `tests/fixtures/builder` into a per-suite temp folder (idempotent, so reruns
 * reuse it), engine configs pointing at it, and a session opener that records
 * every run.
 *
 * @module
 */

import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildTinyModelSet } from "../../tests/fixtures/builder/mod.ts";
import { createSession, createSessionFromBytes, type Feeds, type Tensor } from "../onnx/mod.ts";
import type { EngineConfig, GenerationSettings } from "./engine_config.ts";
import type { BytesOpener, ModelSession, SessionOpener } from "./model_session.ts";
import type { RgbImage } from "./types.ts";

/** Builds (or reuses) the tiny model set for one test suite; returns the models root. */
export async function tinyModels(suite: string): Promise<string> {
  const root = join(tmpdir(), `sd15-mcp-pipeline-${suite}`, "models");
  await buildTinyModelSet(root);
  return root;
}

/** Which ControlNets to enable in {@link tinyConfig}. */
export interface TinyConfigOptions {
  /** SD folder under the root: sd15, sd15-optimum, sd15-optimum-scalar, sd15-lcm, sd15-fp16. */
  set?: string;
  /** Generation settings overrides. */
  generation?: Partial<GenerationSettings>;
  /** Enabled ControlNets with their scales. */
  controlnets?: Partial<Record<"depth" | "openpose" | "inpaint", number>>;
}

/** An engine config for the tiny set: pndm, 3 steps, guidance 7.5, 1 thread. */
export function tinyConfig(root: string, options: TinyConfigOptions = {}): EngineConfig {
  const set = options.set ?? "sd15";
  const cn = options.controlnets ?? {};
  return {
    models: {
      base: join(root, set),
      controlnetUnet: join(root, "sd15", "controlnet_unet", "model.onnx"),
    },
    runtime: {
      executionProvider: "cpu",
      intraOpThreads: 1,
      interOpThreads: 1,
      graphOptimization: "all",
      cpuMemArena: false,
      memoryPattern: true,
      imageSessions: { cpuMemArena: false, memoryPattern: true },
      executionMode: "sequential",
      optimizedCache: null,
      warmUp: false,
    },
    generation: {
      steps: 3,
      guidanceScale: 7.5,
      scheduler: "pndm",
      timestepSpacing: undefined,
      karras: false,
      eta: 0,
      ...options.generation,
    },
    controlnet: {
      depth: {
        enabled: cn.depth !== undefined,
        model: join(root, "controlnet", "depth.onnx"),
        preprocessor: join(root, "annotators", "depth.onnx"),
        preprocessorInput: "unit",
        conditioningScale: cn.depth ?? 1,
      },
      openpose: {
        enabled: cn.openpose !== undefined,
        model: join(root, "controlnet", "openpose.onnx"),
        detector: join(root, "annotators", "yolox_l.onnx"),
        estimator: join(root, "annotators", "dw-ll_ucoco_384.onnx"),
        conditioningScale: cn.openpose ?? 1,
      },
      inpaint: {
        enabled: cn.inpaint !== undefined,
        model: join(root, "controlnet", "inpaint.onnx"),
        conditioningScale: cn.inpaint ?? 0.5,
      },
    },
  };
}

/** One recorded model run. */
export interface RecordedRun {
  /** Component label the engine opened the model with ("unet", "controlnet", …). */
  label: string;
  /** Feeds by input name: dtype, dims and (for float32) a copy of the values. */
  feeds: Record<
    string,
    { type: string; dims: readonly number[]; data?: Float32Array; ints?: number[] }
  >;
}

/**
 * Session openers (from a path, and from bytes for the rewritten VAE
 * encoder) that record every run, and the runs so far.
 */
export function recordingOpener(): {
  open: SessionOpener;
  openBytes: BytesOpener;
  runs: RecordedRun[];
} {
  const runs: RecordedRun[] = [];
  const record = (session: ModelSession, label: string): ModelSession => ({
    inputs: session.inputs,
    outputs: session.outputs,
    run(feeds: Feeds, outputNames?: readonly string[]): Promise<Record<string, Tensor>> {
      const recorded: RecordedRun["feeds"] = {};
      for (const [name, t] of Object.entries(feeds)) {
        recorded[name] = {
          type: t.type,
          dims: [...t.dims],
          data: t.type === "float32" ? Float32Array.from(t.data as Float32Array) : undefined,
          ints: t.type === "int32" || t.type === "int64"
            ? Array.from(t.data as ArrayLike<number | bigint>, Number)
            : undefined,
        };
      }
      runs.push({ label, feeds: recorded });
      return session.run(feeds, outputNames);
    },
    release: () => session.release(),
  });
  const open: SessionOpener = async (path, options) =>
    record(await createSession(path, options), options.label ?? path);
  const openBytes: BytesOpener = async (model, options) =>
    record(
      await createSessionFromBytes(model.bytes, model.externalData, options),
      options.label ?? model.path,
    );
  return { open, openBytes, runs };
}

/** A deterministic test picture: smooth gradients plus a bright square. */
export function testPicture(width: number, height: number, variant = 0): RgbImage {
  const data = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 3;
      const inSquare = x > width / 4 && x < width / 2 && y > height / 3 && y < (2 * height) / 3;
      data[i] = variant === 0 ? (x * 255) / width : 255 - (y * 255) / height;
      data[i + 1] = variant === 0 ? (y * 255) / height : (x * 97) % 256;
      data[i + 2] = inSquare ? 250 : variant * 60;
    }
  }
  return { width, height, data };
}

/** Number of bytes that differ between two images of one size. */
export function differingBytes(a: RgbImage, b: RgbImage): number {
  let n = 0;
  for (let i = 0; i < a.data.length; i++) if (a.data[i] !== b.data[i]) n++;
  return n;
}
