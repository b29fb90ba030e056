/**
 * The start-up check of a GPU execution provider, before any model is
 * opened: one session of a four-value model (a single `Cast` from float32 to
 * float16) is created with the provider and run once. Creating it proves the
 * provider starts (a GPU adapter, or the CUDA libraries, are there), so a
 * machine without them fails with one message that names the cause and the
 * fix rather than with a model file's name; running it tells whether the
 * device computes in 16-bit floats, which every kernel of an fp16 model
 * needs on WebGPU (a device without `shader-f16` opens fp16 sessions and
 * then fails their first run).
 *
 * The model is written here byte by byte (onnx/onnx.proto3 field numbers),
 * so the check needs no model file and no protobuf library.
 *
 * @module
 */

import {
  createSessionFromBytes,
  type ExecutionProvider,
  Session,
  type SessionOptions,
  Tensor,
} from "./runtime.ts";
import { ExecutionProviderError, isNoFloat16 } from "./providers.ts";
import { concatBytes } from "../bytes/mod.ts";

/** What {@link checkExecutionProvider} found. */
export interface ProviderCheck {
  /** The provider checked. */
  provider: ExecutionProvider;
  /** Whether the device runs float16 kernels (always true on the CPU, which emulates them). */
  float16: boolean;
  /** ONNX Runtime's message when `float16` is false. */
  float16Error?: string;
}

/** The probe's input values and their float16 bit patterns (exact in both types). */
const PROBE_VALUES = [0.5, -2, 1, 65504] as const;
const PROBE_BITS = [0x3800, 0xc000, 0x3c00, 0x7bff] as const;

/**
 * Checks that `provider` starts on this machine and whether it computes in
 * float16. The CPU provider is not probed. Rejects with the message of
 * `explainProviderFailure` (`providers.ts`)
 * when the provider cannot start.
 */
export async function checkExecutionProvider(
  provider: ExecutionProvider,
  options: Pick<SessionOptions, "intraOpThreads"> = {},
): Promise<ProviderCheck> {
  if (provider === "cpu") return { provider, float16: true };
  let session: Session;
  try {
    session = await createSessionFromBytes(castProbeModel(), [], {
      executionProvider: provider,
      // Keeps the single Cast as it is: nothing to fold, nothing moved to the CPU.
      graphOptimization: "disabled",
      intraOpThreads: options.intraOpThreads,
      label: `${provider} provider check`,
    });
  } catch (e) {
    // The explanation alone: no model file is at fault, so none is named.
    if (e instanceof ExecutionProviderError) {
      throw new ExecutionProviderError(provider, e.explanation, undefined, { cause: e.cause });
    }
    throw e;
  }
  try {
    const x = new Tensor("float32", Float32Array.from(PROBE_VALUES), [PROBE_VALUES.length]);
    let out: Record<string, Tensor>;
    try {
      out = await session.run({ x });
    } catch (e) {
      const message = (e as Error).message;
      if (isNoFloat16(message)) return { provider, float16: false, float16Error: message };
      throw e;
    }
    const bits = Array.from(out.y.data as Uint16Array);
    if (bits.join() !== PROBE_BITS.join()) {
      throw new Error(
        `${provider} provider check: float32 → float16 gave [${bits.map(hex)}], ` +
          `expected [${PROBE_BITS.map(hex)}]: the device computes wrong results`,
      );
    }
    return { provider, float16: true };
  } finally {
    await session.release();
  }
}

function hex(n: number): string {
  return `0x${n.toString(16).padStart(4, "0")}`;
}

/**
 * `y = Cast(x, to = FLOAT16)` with `x: float32 [4]`, opset 17, IR version 8:
 * the smallest model that needs a float16 kernel.
 */
export function castProbeModel(): Uint8Array {
  const n = PROBE_VALUES.length;
  const tensorType = (elemType: number) =>
    msg(1, [
      varintField(1, elemType),
      msg(2, [msg(1, [varintField(1, n)])]), // shape { dim { dim_value: 4 } }
    ]);
  const valueInfo = (field: number, name: string, elemType: number) =>
    msg(field, [stringField(1, name), msg(2, [tensorType(elemType)])]);
  const node = msg(1, [
    stringField(1, "x"), // input
    stringField(2, "y"), // output
    stringField(3, "cast"), // name
    stringField(4, "Cast"), // op_type
    msg(5, [stringField(1, "to"), varintField(3, 10), varintField(20, 2)]), // to = FLOAT16 (INT attr)
  ]);
  const graph = msg(7, [
    node,
    stringField(2, "provider_check"),
    valueInfo(11, "x", 1), // FLOAT
    valueInfo(12, "y", 10), // FLOAT16
  ]);
  return concatBytes([
    varintField(1, 8), // ir_version
    stringField(2, "generate-image-sd15-mcp"), // producer_name
    graph,
    msg(8, [stringField(1, ""), varintField(2, 17)]), // opset_import { domain: "", version: 17 }
  ]);
}

function varint(value: number): number[] {
  const out: number[] = [];
  let v = value;
  while (v >= 0x80) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return out;
}

function varintField(field: number, value: number): Uint8Array {
  return Uint8Array.from([...varint(field << 3), ...varint(value)]);
}

function lengthDelimited(field: number, body: Uint8Array): Uint8Array {
  return concatBytes([
    Uint8Array.from([...varint((field << 3) | 2), ...varint(body.length)]),
    body,
  ]);
}

function stringField(field: number, text: string): Uint8Array {
  return lengthDelimited(field, new TextEncoder().encode(text));
}

function msg(field: number, parts: Uint8Array[]): Uint8Array {
  return lengthDelimited(field, concatBytes(parts));
}
