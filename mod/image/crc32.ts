/**
 * CRC-32 as used by PNG chunks: ISO 3309 / ITU-T V.42 polynomial 0xEDB88320
 * (reflected), initial value 0xFFFFFFFF, final XOR 0xFFFFFFFF.
 * Source: PNG specification (W3C, 3rd ed.) Annex D "Sample CRC implementation".
 *
 * @module
 */

const TABLE: Uint32Array = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

/** CRC-32 of `data` as an unsigned 32-bit integer. */
export function crc32(data: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < data.length; i++) c = TABLE[(c ^ data[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
