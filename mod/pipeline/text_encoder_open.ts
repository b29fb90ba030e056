/**
 * Opens the text encoder the way `[prompt]` needs it: as the file is, or
 * with its graph rewritten at load time (`mod/onnx` `rewriteTextEncoder`)
 * for CLIP skip and for the textual-inversion embeddings' rows. A rewritten
 * graph is cached by the optimised-graph cache under the file and the
 * rewrite's name, which holds the clip skip and the sha256 of the rows, so
 * a later start with the same settings opens it without reading or
 * rewriting the file, and other embeddings get another entry. LoRAs blended
 * at load (`mod/lora`) are blended first, then the result is rewritten.
 *
 * @module
 */

import { dirname, join } from "node:path";
import {
  type ExternalDataFile,
  readModelInfo,
  rewriteTextEncoder,
  type SessionOptions,
  textEncoderRewriteName,
} from "../onnx/mod.ts";
import type { LoraSet } from "../lora/mod.ts";
import { log } from "../log/mod.ts";
import type { PromptEmbedding } from "../prompt/mod.ts";
import type {
  BytesOpener,
  ModelSession,
  RewriteCacheOpener,
  SessionOpener,
} from "./model_session.ts";

/** One textual-inversion embedding, its vectors read (`[prompt] embeddings`). */
export interface EngineEmbedding {
  /** The word that calls it. */
  name: string;
  /** `count × width` float32 values, row-major. */
  vectors: Float32Array;
  /** Number of vectors (positions it takes in a prompt). */
  count: number;
  /** First 12 hex digits of the file's sha256 (AUTOMATIC1111's "TI hashes"). */
  hash?: string;
}

/** What the text encoder is opened for. */
export interface TextEncoderPlan {
  /** AUTOMATIC1111's CLIP skip (1 = the last layer). */
  clipSkip: number;
  /** Embeddings whose vectors become rows of the token table, in order. */
  embeddings: readonly EngineEmbedding[];
}

/**
 * The embeddings as the prompt reader takes them: each vector's token id,
 * counted on from `firstId` (the tokenizer's vocabulary size) in the order
 * the rows are appended, as diffusers `load_textual_inversion` adds tokens
 * after the vocabulary (and `mod/prompt` `loadEmbeddings` numbers them).
 */
export function promptEmbeddings(
  embeddings: readonly EngineEmbedding[],
  firstId: number,
): PromptEmbedding[] {
  let next = firstId;
  return embeddings.map((e) => {
    const rowIds = Array.from({ length: e.count }, (_, k) => next + k);
    next += e.count;
    return { name: e.name, rowIds, ...(e.hash !== undefined ? { hash: e.hash } : {}) };
  });
}

/** Whether the plan changes the graph at all. */
export function needsRewrite(plan: TextEncoderPlan): boolean {
  return plan.clipSkip > 1 || plan.embeddings.length > 0;
}

/** sha256 (hex) of the rows the plan appends: names, counts and values; null when none. */
export async function rowsDigest(embeddings: readonly EngineEmbedding[]): Promise<string | null> {
  if (embeddings.length === 0) return null;
  const parts: Uint8Array[] = [];
  const text = new TextEncoder();
  for (const e of embeddings) {
    parts.push(text.encode(`${e.name}\u0000${e.count}\u0000`));
    parts.push(new Uint8Array(e.vectors.buffer, e.vectors.byteOffset, e.vectors.byteLength));
  }
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", all));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** A model file and every external data file it names, read into memory. */
async function readModelFiles(
  path: string,
): Promise<{ path: string; bytes: Uint8Array; externalData: ExternalDataFile[] }> {
  const externalData: ExternalDataFile[] = [];
  for (const ref of (await readModelInfo(path)).externalData) {
    externalData.push({
      path: ref.location,
      data: await Deno.readFile(join(dirname(path), ref.location)),
    });
  }
  return { path, bytes: await Deno.readFile(path), externalData };
}

/**
 * A session opener for the text encoder under `plan`: the engine's opener
 * unchanged when nothing is rewritten; else the cached rewritten graph, or
 * the file (LoRAs blended when `loras` has some) rewritten and opened from
 * bytes.
 */
export async function textEncoderOpener(
  plan: TextEncoderPlan,
  open: SessionOpener,
  openBytes: BytesOpener,
  openCached: RewriteCacheOpener,
  loras?: LoraSet,
): Promise<SessionOpener> {
  const blended = loras !== undefined && !loras.empty;
  if (!needsRewrite(plan)) {
    return blended ? (p, o) => loras.open(p, "text_encoder", o, open) : open;
  }
  const rewrite = textEncoderRewriteName(plan.clipSkip, await rowsDigest(plan.embeddings));
  const rows = plan.embeddings.map((e) => ({ name: e.name, values: e.vectors, count: e.count }));
  const rewriteBytes = async (
    model: { path: string; bytes: Uint8Array; externalData: ExternalDataFile[] },
    options: SessionOptions,
    cacheName?: string,
  ): Promise<ModelSession> => {
    const data = new Map(model.externalData.map((f) => [f.path, f.data]));
    const done = await rewriteTextEncoder(
      model.bytes,
      { clipSkip: plan.clipSkip, rows },
      (location, offset, length) => {
        const file = data.get(location);
        if (!file) throw new Error(`external data ${location} was not read`);
        return Promise.resolve(
          file.subarray(offset, length === undefined ? undefined : offset + length),
        );
      },
    );
    log("info", "pipeline", "text_encoder rewritten for the prompt settings", {
      model: model.path,
      clipSkip: plan.clipSkip,
      layers: done.layers,
      layerNorm: done.layerNorm,
      embeddings: plan.embeddings.map((e) => ({ name: e.name, vectors: e.count })),
      tableRows: done.table.rows,
    });
    return await openBytes(
      {
        path: model.path,
        bytes: done.model,
        externalData: model.externalData,
        ...(cacheName !== undefined ? { rewrite: cacheName } : {}),
      },
      options,
    );
  };
  const fromFile = async (path: string, options: SessionOptions): Promise<ModelSession> => {
    const cached = await openCached({ path, rewrite }, options);
    if (cached) {
      log("info", "pipeline", "text_encoder: its rewritten graph from the cache", {
        model: path,
        rewrite,
      });
      return cached;
    }
    return await rewriteBytes(await readModelFiles(path), options, rewrite);
  };
  if (!blended) return fromFile;
  // The LoRA-blended bytes are new each start: cached by their bytes, not by the file's name.
  return (p, o) =>
    loras.open(
      p,
      "text_encoder",
      o,
      async (patched, po) => await rewriteBytes(await readModelFiles(patched), po),
      rewriteBytes,
    );
}
