/**
 * Where a built graph's weights come from. The graph builders ask for every
 * trainable tensor once, by its diffusers state-dict name and the shape the
 * graph stores it in; a {@link WeightSource} answers with the values (or a
 * function that makes them when the model is written, so a writer holds one
 * tensor at a time):
 *
 * - {@link RandomWeights}: seeded uniform values in torch's default init
 *   bounds and constant norm parameters, what the test and bench stand-ins
 *   use (byte-identical for a seed);
 * - {@link MapWeights}: the tensors of a diffusers-named map (a checkpoint
 *   read by `mod/checkpoint`), read one at a time when written, with every
 *   name and shape checked before anything is written.
 *
 * @module
 */

import { type InitData, numel } from "./graph.ts";
import { Rng } from "./rng.ts";

/** One tensor a graph builder needs. */
export interface WeightRequest {
  /** Initializer name hint in the graph (and the random stream's name). */
  hint: string;
  /** diffusers state-dict name, e.g. `down_blocks.0.resnets.0.conv1.weight`. */
  name: string;
  /** Shape the graph stores. */
  dims: readonly number[];
  /**
   * How the state-dict tensor becomes the graph's: `same` (same values in the
   * same order: convolutions, embeddings, norm parameters stored `[C,1,1]`), or
   * `transposed` (a torch Linear `[out, in]` stored `[in, out]` for a MatMul).
   */
  layout: "same" | "transposed";
  /** What a freshly made module holds: uniform in [-bound, bound), or a constant. */
  init: { uniform: number } | { fill: number };
}

/** Values now, or a function that makes them (possibly reading them) when the model is written. */
export type WeightData = InitData | (() => InitData) | (() => Promise<InitData>);

/** Answers a graph builder's weight requests. */
export interface WeightSource {
  /** The values of `request` (see {@link WeightData}). */
  tensor(request: WeightRequest): WeightData;
}

/**
 * Seeded random weights. With `lazy`, each uniform tensor takes its own seed
 * from the stream now and makes its values only when written, so full-size
 * models never hold all their weights at once.
 */
export class RandomWeights implements WeightSource {
  readonly #rng: Rng;
  readonly #lazy: boolean;

  /** Weights drawn from `rng`; lazily when `lazy`. */
  constructor(rng: Rng, lazy = false) {
    this.#rng = rng;
    this.#lazy = lazy;
  }

  /** A uniform tensor in its bound, or the constant. */
  tensor(request: WeightRequest): WeightData {
    const n = numel(request.dims);
    if ("fill" in request.init) {
      const value = request.init.fill;
      return () => new Float32Array(n).fill(value);
    }
    const bound = request.init.uniform;
    if (!this.#lazy) return this.#rng.uniform(n, bound);
    const seed = Math.floor(this.#rng.next() * 4294967296);
    return () => new Rng(seed, request.hint).uniform(n, bound);
  }
}

/** One tensor of a diffusers-named map: its dtype and shape, and its values as float32. */
export interface WeightEntry {
  /** The stored element type (`F16`, `BF16`, `F32`, …), for messages. */
  readonly dtype: string;
  /** The stored shape. */
  readonly shape: readonly number[];
  /** Reads the values, widened to float32. */
  read(): Promise<Float32Array>;
}

/** diffusers state-dict names to tensors (what `mod/checkpoint` reads from a checkpoint). */
export type WeightMap = ReadonlyMap<string, WeightEntry>;

/** A problem between what a graph needs and what a map holds. */
export interface WeightProblem {
  /** The diffusers name. */
  name: string;
  /** What is wrong, in words. */
  problem: string;
}

/**
 * Weights read from a diffusers-named map. Every request is checked as it is
 * made (present, shape matching up to trailing 1s, so a 1×1 convolution takes
 * a Linear's `[out, in]` and a norm's `[C,1,1]` takes `[C]`); the graph is
 * written only when {@link MapWeights.problems} is empty. Values are read
 * when the model is written, one tensor at a time.
 */
export class MapWeights implements WeightSource {
  readonly #map: WeightMap;
  readonly #used = new Set<string>();
  readonly #problems: WeightProblem[] = [];

  /** Reads from `map`. */
  constructor(map: WeightMap) {
    this.#map = map;
  }

  /** A function that reads, checks and lays out the tensor `request.name`. */
  tensor(request: WeightRequest): WeightData {
    const { name, dims, layout } = request;
    const entry = this.#map.get(name);
    this.#used.add(name);
    if (!entry) {
      this.#problems.push({ name, problem: "missing" });
      return () => Promise.reject(new Error(`weight ${name} is missing`));
    }
    const want = layout === "transposed" ? [dims[1], dims[0]] : [...dims];
    if (!sameShape(entry.shape, want)) {
      this.#problems.push({
        name,
        problem: `shape [${entry.shape.join(", ")}], expected [${want.join(", ")}]`,
      });
    }
    return async () => {
      const values = await entry.read();
      if (values.length !== numel(dims)) {
        throw new Error(`weight ${name}: read ${values.length} values, expected ${numel(dims)}`);
      }
      return layout === "transposed" ? transpose(values, dims[1], dims[0]) : values;
    };
  }

  /** Names asked for that are missing or of another shape (empty: the graph can be written). */
  problems(): readonly WeightProblem[] {
    return this.#problems;
  }

  /** Names in the map no request asked for, sorted. */
  unused(): string[] {
    return [...this.#map.keys()].filter((k) => !this.#used.has(k)).sort();
  }
}

/** Shapes equal once trailing 1s are dropped from both. */
function sameShape(a: readonly number[], b: readonly number[]): boolean {
  const trim = (s: readonly number[]) => {
    let n = s.length;
    while (n > 1 && s[n - 1] === 1) n--;
    return s.slice(0, n);
  };
  const x = trim(a);
  const y = trim(b);
  return x.length === y.length && x.every((v, i) => v === y[i]);
}

/** A row-major `[rows, cols]` matrix transposed to `[cols, rows]`. */
export function transpose(values: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(values.length);
  for (let r = 0; r < rows; r++) {
    const base = r * cols;
    for (let c = 0; c < cols; c++) out[c * rows + r] = values[base + c];
  }
  return out;
}
