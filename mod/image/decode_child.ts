/**
 * The decode process: one input image in on stdin, its pixels at the
 * generation size out on stdout, then it exits. Decoding runs in a process
 * of its own because libvips works on native threads that nothing in the
 * server's process can stop: a Worker's `terminate()` left a libjpeg decode
 * burning a core for the rest of its 16 s (measured on a 2-core x86-64 VM),
 * while a process is stopped at once by SIGKILL (`decode_process.ts`).
 *
 * Frames, both ways: a 4-byte big-endian length, that many bytes of JSON,
 * then the payload to the end of the stream. In: `{ op, sizes }`
 * and the encoded file; out: `{ ok: true, width, height, channels }` and
 * the raw pixels, or `{ ok: false, message }`.
 *
 * @module
 */

import { closestAspect, type Size } from "./aspect.ts";
import { resizeLanczos } from "./lanczos.ts";
import { resizeNearest } from "./nearest.ts";
import { decodeGray, decodeRgb, type RawPixels } from "./sharp.ts";

/** What the parent asks for: `rgb` (Lanczos resize) or `gray` (nearest-neighbour resize). */
export interface DecodeOrder {
  /** `rgb`: sRGB, alpha flattened onto white; `gray`: luminance, alpha onto black. */
  op: "rgb" | "gray";
  /**
   * Target sizes: the one whose aspect ratio is closest to the decoded image's
   * (after EXIF orientation) is used ({@link closestAspect}); usually just one.
   */
  sizes: Size[];
}

/** The answer's JSON part. */
export type DecodeAnswer =
  | { ok: true; width: number; height: number; channels: number }
  | { ok: false; message: string };

/** The command-line argument that makes a standalone binary run {@link runDecodeChild}. */
export const DECODE_CHILD_FLAG = "--decode-child";

/** Encodes one frame: the JSON header, then `payload`. */
export function encodeFrame(header: unknown, payload: Uint8Array): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(header));
  const out = new Uint8Array(4 + json.length + payload.length);
  new DataView(out.buffer).setUint32(0, json.length);
  out.set(json, 4);
  out.set(payload, 4 + json.length);
  return out;
}

/** Splits a frame into its JSON header and payload; throws on a malformed frame. */
export function decodeFrame<T>(frame: Uint8Array): { header: T; payload: Uint8Array } {
  if (frame.length < 4) throw new Error(`a frame of ${frame.length} bytes has no header`);
  const length = new DataView(frame.buffer, frame.byteOffset, frame.byteLength).getUint32(0);
  if (4 + length > frame.length) throw new Error("the frame ends inside its header");
  const header = JSON.parse(new TextDecoder().decode(frame.subarray(4, 4 + length))) as T;
  return { header, payload: frame.subarray(4 + length) };
}

/** Decodes and resizes as `order` says. */
export async function decodeOrder(order: DecodeOrder, bytes: Uint8Array): Promise<RawPixels> {
  const full = order.op === "rgb" ? await decodeRgb(bytes) : await decodeGray(bytes);
  const { width, height } = order.sizes[closestAspect(full.width, full.height, order.sizes)];
  return order.op === "rgb"
    ? resizeLanczos(full, width, height)
    : resizeNearest(full, width, height);
}

/** Runs one decode from stdin to stdout (the process's whole life). */
export async function runDecodeChild(): Promise<void> {
  const input = new Uint8Array(await new Response(Deno.stdin.readable).arrayBuffer());
  let answer: Uint8Array;
  try {
    const { header, payload } = decodeFrame<DecodeOrder>(input);
    const pixels = await decodeOrder(header, payload);
    const ok: DecodeAnswer = {
      ok: true,
      width: pixels.width,
      height: pixels.height,
      channels: pixels.channels,
    };
    answer = encodeFrame(ok, pixels.data);
  } catch (error) {
    const failed: DecodeAnswer = {
      ok: false,
      message: error instanceof Error ? error.message : String(error),
    };
    answer = encodeFrame(failed, new Uint8Array());
  }
  const writer = Deno.stdout.writable.getWriter();
  await writer.write(answer);
  await writer.close();
}

if (import.meta.main) await runDecodeChild();
