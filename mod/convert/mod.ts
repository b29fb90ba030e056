/**
 * Model files derived from pinned downloads: deterministic conversions that
 * `deno task models` runs after a download's size and sha256 check out, so
 * the derived file is as reproducible as its input.
 *
 * @module
 */

export { TAESD_CONVERTER_VERSION, TaesdConversionError, taesdDecoderToOnnx } from "./taesd.ts";
