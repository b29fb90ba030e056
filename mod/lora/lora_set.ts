/**
 * The configured LoRAs (`[lora] files`): read and checked once at start-up,
 * then blended into the UNet(s) and the text encoder as they are opened.
 * A file that cannot be read, or none of whose modules matches a node of the
 * UNet or text encoder, fails start-up with a message naming it; a partial
 * match is logged.
 *
 * @module
 */

import { log } from "../log/mod.ts";
import { createSession, createSessionFromBytes, type Session } from "../onnx/mod.ts";
import type { ExternalDataFile, SessionOptions } from "../onnx/mod.ts";
import type { LoraTarget } from "./kohya_keys.ts";
import { loraModules } from "./lora_layout.ts";
import { patchModel, type WeightedLora } from "./onnx_patch.ts";
import { parseSafetensors } from "./safetensors.ts";

/** One configured LoRA: absolute file path and user weight. */
export interface LoraFileConfig {
  /** Absolute path of the `.safetensors` file. */
  path: string;
  /** Multiplies the update; 0 = no effect, 1 = as trained. */
  weight: number;
}

/** A LoRA problem at start-up; the message names the file. */
export class LoraError extends Error {
  /** Creates an error with a complete message. */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "LoraError";
  }
}

/** The LoRAs of a configuration, ready to blend into models as they open. */
export class LoraSet {
  /** The LoRAs, in config order. */
  readonly loras: readonly (WeightedLora & { unknownKeys: readonly string[] })[];
  readonly #matched: Set<string>[];

  private constructor(loras: LoraSet["loras"]) {
    this.loras = loras;
    this.#matched = loras.map(() => new Set<string>());
  }

  /**
   * Reads and parses every file.
   *
   * @throws LoraError naming the file when it is unreadable, not safetensors,
   *   or not a usable kohya or diffusers/PEFT LoRA
   */
  static async load(files: readonly LoraFileConfig[]): Promise<LoraSet> {
    const loras = [];
    for (const f of files) {
      let bytes: Uint8Array;
      try {
        bytes = await Deno.readFile(f.path);
      } catch (e) {
        throw new LoraError(`LoRA ${f.path}: cannot read: ${(e as Error).message}`, { cause: e });
      }
      try {
        const { modules, unknownKeys } = loraModules(parseSafetensors(bytes, f.path), f.path);
        loras.push({ path: f.path, weight: f.weight, modules, unknownKeys });
      } catch (e) {
        throw new LoraError(`LoRA ${(e as Error).message}`, { cause: e });
      }
    }
    return new LoraSet(loras);
  }

  /** True when no LoRA is configured. */
  get empty(): boolean {
    return this.loras.length === 0;
  }

  /**
   * Opens the model at `path` with every LoRA's `target` modules blended in
   * (from a patched copy beside it, or from patched bytes: `patchModel`);
   * opens it from the path unchanged when no module matches one of its
   * nodes. Paths are opened with `openPath` (the engine's opener, so the
   * session is the engine's kind), patched bytes with `openBytes` (default
   * `createSessionFromBytes`; the engine passes one that rewrites the text
   * encoder's graph before opening). Records which modules matched.
   */
  async open<S = Session>(
    path: string,
    target: LoraTarget,
    options: SessionOptions,
    openPath: (path: string, options: SessionOptions) => Promise<S> = createSession as (
      path: string,
      options: SessionOptions,
    ) => Promise<S>,
    openBytes?: (
      model: { path: string; bytes: Uint8Array; externalData: ExternalDataFile[] },
      options: SessionOptions,
    ) => Promise<S>,
  ): Promise<S | Session> {
    const patched = this.empty ? undefined : await patchModel(path, target, this.loras);
    if (!patched) return await openPath(path, options);
    patched.matched.forEach((keys, i) => keys.forEach((k) => this.#matched[i].add(k)));
    log("info", "lora", "blended LoRA weights", {
      model: path,
      weights: patched.patched.length,
      files: this.loras.map((l, i) => ({
        path: l.path,
        weight: l.weight,
        modules: patched.matched[i].size,
      })),
    });
    try {
      return patched.file ? await openPath(patched.file, options) : openBytes
        ? await openBytes(
          { path, bytes: patched.model, externalData: patched.externalData },
          options,
        )
        : await createSessionFromBytes(patched.model, patched.externalData, options);
    } finally {
      // ONNX Runtime has read (or mapped) the patched copy by now.
      await patched.dispose();
    }
  }

  /**
   * Call after the UNet and the text encoder are open: fails when a LoRA
   * matched no node at all, logs a partial match (how many modules did and
   * did not, with the first unmatched keys).
   *
   * @throws LoraError naming the file
   */
  assertMatched(): void {
    checkLoraMatches(
      this.loras.map((l) => ({ ...l, moduleKeys: l.modules.map((m) => m.key) })),
      this.#matched,
    );
  }
}

/** What {@link checkLoraMatches} needs of one LoRA. */
export interface LoraMatchInput {
  /** The file (for messages). */
  path: string;
  /** Every module key it has. */
  moduleKeys: readonly string[];
  /** Tensors that are not LoRA modules. */
  unknownKeys: readonly string[];
}

/**
 * Judges which modules of each LoRA matched a node of some model (`matched`,
 * per LoRA in config order): fails when a LoRA matched none, logs a partial
 * match (how many modules did and did not, with the first unmatched keys).
 *
 * @throws LoraError naming the file
 */
export function checkLoraMatches(
  loras: readonly LoraMatchInput[],
  matched: ReadonlyArray<ReadonlySet<string>>,
): void {
  loras.forEach((lora, i) => {
    const hit = matched[i] ?? new Set<string>();
    const missed = lora.moduleKeys.filter((k) => !hit.has(k));
    const unmatched = missed.length + lora.unknownKeys.length;
    if (hit.size === 0) {
      const sample = [...missed, ...lora.unknownKeys].slice(0, 3).join(", ");
      throw new LoraError(
        `LoRA ${lora.path}: none of its ${lora.moduleKeys.length} modules ` +
          `(${lora.unknownKeys.length} other tensors) matches a node of the UNet or the text ` +
          `encoder (expected kohya keys lora_unet_…/lora_te_… or diffusers/PEFT keys ` +
          `unet.….lora_A.weight, and an unoptimized torch-export ` +
          `graph; first keys: ${sample || "none"})`,
      );
    }
    if (unmatched > 0) {
      log("warn", "lora", "LoRA applies only partly", {
        file: lora.path,
        matched: hit.size,
        unmatched,
        first_unmatched: [...missed, ...lora.unknownKeys].slice(0, 5),
      });
    }
  });
}
