/**
 * Small layer helpers over {@link Graph}: seeded conv/linear weights, SiLU,
 * shape plumbing, and fp16/fp32 graph I/O (compute stays float32; an fp16
 * model gets Cast nodes at its inputs and outputs, like an "io16" export).
 *
 * All ops are valid at opset 17 (ReduceMean/ReduceMax keep `axes` as an
 * attribute up to opset 17; Unsqueeze/Squeeze take `axes` as an input since 13).
 *
 * @module
 */

import { type Attr, type Dim, type ElemType, Graph } from "./graph.ts";
import { Rng } from "./rng.ts";
import { numel } from "./graph.ts";
import { RandomWeights, type WeightRequest, type WeightSource } from "./weights.ts";

/** Opset used by every built model. */
export const OPSET = 17;

/** Float type of a model's float inputs and outputs. */
export type IoFloat = "float32" | "float16";

/** Graph + weight source + the model's float I/O type. */
export class Layers {
  /** The graph being built. */
  readonly g: Graph;
  /** Where the weights come from. */
  readonly source: WeightSource;
  /** Float type of the graph I/O. */
  readonly io: IoFloat;
  /** Trainable parameters created so far (weights and biases; not constants). */
  params = 0;

  /**
   * Starts a model named `name`. `weights`: a random stream (with `lazy`,
   * each weight gets its own seed now and its values only when the model is
   * written, so full-size models never hold all their weights at once) or any
   * {@link WeightSource}, e.g. a checkpoint's tensors.
   */
  constructor(name: string, weights: Rng | WeightSource, io: IoFloat = "float32", lazy = false) {
    this.g = new Graph(name);
    this.source = weights instanceof Rng ? new RandomWeights(weights, lazy) : weights;
    this.io = io;
  }

  /** A float input in the model's I/O type; returns the float32 value to compute with. */
  floatIn(name: string, shape: readonly Dim[]): string {
    this.g.input(name, this.io, shape);
    return this.io === "float32"
      ? name
      : this.g.op("Cast", [name], { to: { i: 1 } }, `${name}_f32`);
  }

  /** A float output in the model's I/O type from the float32 `value`. */
  floatOut(value: string, name: string, shape: readonly Dim[]): void {
    const v = this.io === "float32" ? value : this.g.op("Cast", [value], { to: { i: 10 } });
    this.g.output(v, name, this.io, shape);
  }

  /** Any typed input; returns its name. */
  input(name: string, type: ElemType, shape: readonly Dim[]): string {
    return this.g.input(name, type, shape);
  }

  /** A uniform float32 weight in [-bound, bound) (named `hint` in a weight map). */
  weight(hint: string, dims: readonly number[], bound: number): string {
    return this.param({ hint, name: hint, dims, layout: "same", init: { uniform: bound } });
  }

  /** A trainable parameter of constant value (norm scales and shifts start at 1 and 0). */
  constParam(hint: string, dims: readonly number[], value: number): string {
    return this.param({ hint, name: hint, dims, layout: "same", init: { fill: value } });
  }

  /** A trainable float32 tensor from the weight source; returns the initializer's name. */
  param(request: WeightRequest): string {
    this.params += numel(request.dims);
    return this.g.init(request.hint, "float32", request.dims, this.source.tensor(request));
  }

  /**
   * Conv2d with torch's default init bound 1/sqrt(fan_in) (times `gain`),
   * "same" padding for odd kernels. `scope` names the node like a torch
   * export does (`/<scope>/Conv`), so LoRA keys can find it.
   */
  conv(
    x: string,
    cin: number,
    cout: number,
    k: number,
    opts: {
      stride?: number;
      gain?: number;
      /** Fixed bias values; null = no bias input (torch `bias=False`). */
      bias?: readonly number[] | null;
      hint?: string;
      scope?: string;
    } = {},
  ): string {
    const stride = opts.stride ?? 1;
    const bound = (opts.gain ?? 1) / Math.sqrt(cin * k * k);
    const hint = opts.hint ?? "conv";
    const w = this.weight(`${hint}_w`, [cout, cin, k, k], bound);
    const b = opts.bias === null
      ? undefined
      : opts.bias
      ? this.g.init(`${hint}_b`, "float32", [cout], Float32Array.from(opts.bias))
      : this.weight(`${hint}_b`, [cout], bound);
    const p = (k - 1) >> 1;
    return this.g.op(
      "Conv",
      b === undefined ? [x, w] : [x, w, b],
      {
        kernel_shape: { ints: [k, k] },
        pads: { ints: [p, p, p, p] },
        strides: { ints: [stride, stride] },
      },
      hint,
      opts.scope === undefined ? undefined : `/${opts.scope}/Conv`,
    );
  }

  /**
   * x·W + b over the last axis (W stored [din, dout] as torch exports a
   * Linear). `scope` names the MatMul node `/<scope>/MatMul` like a torch export.
   */
  linear(
    x: string,
    din: number,
    dout: number,
    gain = 1,
    hint = "linear",
    scope?: string,
  ): string {
    const bound = gain / Math.sqrt(din);
    const w = this.weight(`${hint}_w`, [din, dout], bound);
    const b = this.weight(`${hint}_b`, [dout], bound);
    const name = scope === undefined ? undefined : `/${scope}/MatMul`;
    return this.add(this.g.op("MatMul", [x, w], {}, undefined, name), b);
  }

  /** SiLU(x) = x·sigmoid(x). */
  silu(x: string): string {
    return this.mul(x, this.g.op("Sigmoid", [x]));
  }

  /** a + b (broadcasting). */
  add(a: string, b: string): string {
    return this.g.op("Add", [a, b]);
  }

  /** a · b (broadcasting). */
  mul(a: string, b: string): string {
    return this.g.op("Mul", [a, b]);
  }

  /** a − b (broadcasting). */
  sub(a: string, b: string): string {
    return this.g.op("Sub", [a, b]);
  }

  /** x · c for a float constant c. */
  scale(x: string, c: number): string {
    return this.mul(x, this.g.constF([c], []));
  }

  /** x + c for a float constant c. */
  shift(x: string, c: number): string {
    return this.add(x, this.g.constF([c], []));
  }

  /** Sum of several values of one shape. */
  sum(values: readonly string[]): string {
    return values.reduce((a, b) => this.add(a, b));
  }

  /** Unsqueeze at `axes`. */
  unsqueeze(x: string, axes: readonly number[]): string {
    return this.g.op("Unsqueeze", [x, this.g.constI64(axes)]);
  }

  /** Squeeze at `axes`. */
  squeeze(x: string, axes: readonly number[]): string {
    return this.g.op("Squeeze", [x, this.g.constI64(axes)]);
  }

  /** Reshape to a constant shape (0 = keep, -1 = infer). */
  reshape(x: string, shape: readonly number[]): string {
    return this.g.op("Reshape", [x, this.g.constI64(shape)]);
  }

  /** Cast to float32. */
  toFloat(x: string): string {
    return this.g.op("Cast", [x], { to: { i: 1 } });
  }

  /** Reduce over `axes` with `op` ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum"). */
  reduce(op: string, x: string, axes: readonly number[], keepdims: boolean): string {
    return this.g.op(op, [x], { axes: { ints: axes }, keepdims: { i: keepdims ? 1 : 0 } });
  }

  /**
   * Nearest-neighbour resize of NCHW `x` to the spatial size of `like`
   * (sizes from the runtime shapes, so odd sizes work like diffusers'
   * `upsample_size`).
   */
  resizeTo(x: string, like: string): string {
    const g = this.g;
    const nc = g.op("Shape", [x], { start: { i: 0 }, end: { i: 2 } });
    const hw = g.op("Shape", [like], { start: { i: 2 }, end: { i: 4 } });
    const sizes = g.op("Concat", [nc, hw], { axis: { i: 0 } });
    return g.op("Resize", [x, "", "", sizes], {
      mode: { s: "nearest" },
      coordinate_transformation_mode: { s: "asymmetric" },
      nearest_mode: { s: "floor" },
    });
  }

  /** Resize NCHW `x` by an integer factor in H and W. */
  upscale(x: string, factor: number, mode: "nearest" | "linear"): string {
    const scales = this.g.constF([1, 1, factor, factor]);
    const attrs: Record<string, Attr> = mode === "nearest"
      ? {
        mode: { s: "nearest" },
        coordinate_transformation_mode: { s: "asymmetric" },
        nearest_mode: { s: "floor" },
      }
      : { mode: { s: "linear" }, coordinate_transformation_mode: { s: "half_pixel" } };
    return this.g.op("Resize", [x, "", scales], attrs);
  }
}
