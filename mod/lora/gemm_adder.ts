/**
 * W + up·down with ONNX Runtime's Gemm (multi-threaded, vectorised) instead
 * of a JavaScript loop: the LCM LoRA's 278 rank-64 updates of a full-size
 * UNet are about 51 G multiply-adds, minutes in scalar JS and seconds in
 * ONNX Runtime (docs/performance.md, "LoRA merge").
 *
 * ONNX `Gemm`: Y = alpha·A'·B' + beta·C with A' = transA ? Aᵀ : A. For a
 * weight in torch layout [out, in·k·k] (Conv, Gemm with transB=1) the update
 * is up[out, r]·down[r, in·k·k]; for a MatMul weight stored [in, out] it is
 * its transpose, downᵀ·upᵀ, which Gemm computes with transA = transB = 1
 * without transposing anything in memory.
 *
 * @module
 */

import onnx from "onnx-proto";
import { createSessionFromBytes, type Session, Tensor } from "../onnx/mod.ts";

const P = onnx.onnx;

/** A float32 matrix input or output with symbolic dims. */
function matrix(name: string): onnx.onnx.IValueInfoProto {
  return {
    name,
    type: {
      tensorType: {
        elemType: P.TensorProto.DataType.FLOAT,
        shape: { dim: [{ dimParam: `${name}_rows` }, { dimParam: `${name}_cols` }] },
      },
    },
  };
}

/** Y = A'·B' + C as an ONNX model (opset 17). */
function gemmModel(transposed: boolean): Uint8Array {
  const flag = (name: string) => ({
    name,
    type: P.AttributeProto.AttributeType.INT,
    i: transposed ? 1 : 0,
  });
  return P.ModelProto.encode({
    irVersion: 8,
    opsetImport: [{ domain: "", version: 17 }],
    producerName: "generate-image-sd15-mcp lora",
    graph: {
      name: "lora_gemm",
      input: [matrix("a"), matrix("b"), matrix("c")],
      output: [matrix("y")],
      node: [{
        opType: "Gemm",
        input: ["a", "b", "c"],
        output: ["y"],
        name: "gemm",
        attribute: [flag("transA"), flag("transB")],
      }],
    },
  }).finish();
}

/** Adds low-rank updates to weight matrices with ONNX Runtime. */
export class GemmAdder {
  readonly #plain: Session;
  readonly #transposed: Session;

  private constructor(plain: Session, transposed: Session) {
    this.#plain = plain;
    this.#transposed = transposed;
  }

  /** Opens the two Gemm sessions (torch layout and transposed layout). */
  static async open(): Promise<GemmAdder> {
    const plain = await createSessionFromBytes(gemmModel(false), [], { label: "lora gemm" });
    try {
      return new GemmAdder(
        plain,
        await createSessionFromBytes(gemmModel(true), [], { label: "lora gemm (transposed)" }),
      );
    } catch (e) {
      await plain.release();
      throw e;
    }
  }

  /**
   * Returns W + up·down (torch layout, W [rows, cols]) or, when `transposed`,
   * W + (up·down)ᵀ (W stored [cols, rows]). `up` is [rows, rank] and already
   * carries the scale; `down` is [rank, cols].
   */
  async add(
    w: Float32Array,
    up: Float32Array,
    down: Float32Array,
    dims: { rows: number; cols: number; rank: number; transposed: boolean },
  ): Promise<Float32Array> {
    const { rows, cols, rank, transposed } = dims;
    const c = new Tensor("float32", w, transposed ? [cols, rows] : [rows, cols]);
    const feeds = transposed
      ? {
        a: new Tensor("float32", down, [rank, cols]),
        b: new Tensor("float32", up, [rows, rank]),
        c,
      }
      : {
        a: new Tensor("float32", up, [rows, rank]),
        b: new Tensor("float32", down, [rank, cols]),
        c,
      };
    const out = await (transposed ? this.#transposed : this.#plain).run(feeds);
    return out.y.data as Float32Array;
  }

  /** Releases both sessions. */
  async release(): Promise<void> {
    await this.#plain.release();
    await this.#transposed.release();
  }
}
