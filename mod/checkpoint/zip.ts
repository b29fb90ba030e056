/**
 * The central directory of a zip archive, read with bounds checks (PKWARE
 * APPNOTE.TXT §4.3: end of central directory record, its zip64 form, the
 * central directory file headers, local file headers). Only what PyTorch's
 * writer (`caffe2/serialize/inline_container.cc`) produces is accepted:
 * stored (uncompressed), unencrypted members, read at their offsets.
 *
 * @module
 */

import { CheckpointError } from "./errors.ts";
import type { RandomAccessFile } from "./weights.ts";

/** One member of the archive, where its bytes lie in the file. */
export interface ZipMember {
  /** Name as stored. */
  name: string;
  /** Offset of its data in the file. */
  dataOffset: number;
  /** Its size (stored: compressed = uncompressed). */
  size: number;
}

const EOCD = 0x06054b50;
const EOCD64 = 0x06064b50;
const EOCD64_LOCATOR = 0x07064b50;
const CENTRAL = 0x02014b50;
const LOCAL = 0x04034b50;
/** The end record is 22 bytes plus a comment of at most 65535. */
const TAIL = 22 + 65535;
/** PyTorch's data.pkl is small; storages hold the data. A central directory far past this is corrupt. */
const MAX_DIRECTORY = 256 * 1024 * 1024;

/**
 * Reads the members of a zip archive.
 *
 * @throws CheckpointError naming the file and what is wrong with its directory
 */
export async function readZipDirectory(file: RandomAccessFile): Promise<ZipMember[]> {
  const fail = (why: string): never => {
    throw new CheckpointError(`${file.path}: not a readable PyTorch zip file: ${why}`);
  };
  const tailStart = Math.max(0, file.size - TAIL);
  const tail = await file.read(tailStart, file.size - tailStart);
  const tv = new DataView(tail.buffer, tail.byteOffset, tail.byteLength);
  let e = -1;
  for (let i = tail.length - 22; i >= 0; i--) {
    if (tv.getUint32(i, true) === EOCD && i + 22 + tv.getUint16(i + 20, true) <= tail.length) {
      e = i;
      break;
    }
  }
  if (e < 0) {
    fail("no end of central directory record (the file is truncated or not a zip archive)");
  }
  const eocdAt = tailStart + e;
  if (tv.getUint16(e + 4, true) !== 0 || tv.getUint16(e + 6, true) !== 0) {
    fail("a multi-disk archive");
  }
  let count = tv.getUint16(e + 10, true);
  let dirSize = tv.getUint32(e + 12, true);
  let dirOffset = tv.getUint32(e + 16, true);
  let dirEnd = eocdAt;
  if (count === 0xffff || dirSize === 0xffffffff || dirOffset === 0xffffffff) {
    // zip64: a locator 20 bytes before the end record points at the zip64 end record.
    if (eocdAt < 20) fail("zip64 fields without a zip64 locator");
    const loc = await file.read(eocdAt - 20, 20);
    const lv = new DataView(loc.buffer);
    if (lv.getUint32(0, true) !== EOCD64_LOCATOR) fail("zip64 fields without a zip64 locator");
    const at = big(lv.getBigUint64(8, true), fail);
    if (at + 56 > eocdAt - 20) fail(`zip64 end record at ${at} is outside the file`);
    const rec = await file.read(at, 56);
    const rv = new DataView(rec.buffer);
    if (rv.getUint32(0, true) !== EOCD64) fail(`no zip64 end record at ${at}`);
    count = big(rv.getBigUint64(32, true), fail);
    dirSize = big(rv.getBigUint64(40, true), fail);
    dirOffset = big(rv.getBigUint64(48, true), fail);
    dirEnd = at;
  }
  if (dirOffset + dirSize > dirEnd) {
    fail(
      `the central directory (${dirSize} bytes at ${dirOffset}) runs past its end record at ${dirEnd}`,
    );
  }
  if (dirSize > MAX_DIRECTORY) fail(`a ${dirSize}-byte central directory`);
  const dir = await file.read(dirOffset, dirSize);
  const dv = new DataView(dir.buffer, dir.byteOffset, dir.byteLength);
  const members: ZipMember[] = [];
  const names = new Set<string>();
  let p = 0;
  for (let n = 0; n < count; n++) {
    if (p + 46 > dir.length || dv.getUint32(p, true) !== CENTRAL) {
      fail(`central directory entry ${n} at ${dirOffset + p} is missing or cut short`);
    }
    const flags = dv.getUint16(p + 8, true);
    const method = dv.getUint16(p + 10, true);
    let compressed = dv.getUint32(p + 20, true);
    let size = dv.getUint32(p + 24, true);
    const nameLen = dv.getUint16(p + 28, true);
    const extraLen = dv.getUint16(p + 30, true);
    const commentLen = dv.getUint16(p + 32, true);
    let localAt = dv.getUint32(p + 42, true);
    const end = p + 46 + nameLen + extraLen + commentLen;
    if (end > dir.length) fail(`central directory entry ${n} runs past the directory`);
    let name: string;
    try {
      name = new TextDecoder("utf-8", { fatal: true }).decode(
        dir.subarray(p + 46, p + 46 + nameLen),
      );
    } catch {
      return fail(`member ${n}'s name is not UTF-8`);
    }
    // zip64 extended information (header 0x0001): the 0xffffffff fields, in this order.
    let x = p + 46 + nameLen;
    const xEnd = x + extraLen;
    while (x + 4 <= xEnd) {
      const id = dv.getUint16(x, true);
      const len = dv.getUint16(x + 2, true);
      if (x + 4 + len > xEnd) fail(`member ${name}'s extra field runs past its entry`);
      if (id === 0x0001) {
        let q = x + 4;
        const next = () => {
          if (q + 8 > x + 4 + len) fail(`member ${name}'s zip64 field is short`);
          const v = big(dv.getBigUint64(q, true), fail);
          q += 8;
          return v;
        };
        if (size === 0xffffffff) size = next();
        if (compressed === 0xffffffff) compressed = next();
        if (localAt === 0xffffffff) localAt = next();
      }
      x += 4 + len;
    }
    p = end;
    if (names.has(name)) fail(`member ${name} appears twice`);
    names.add(name);
    if (flags & 1) fail(`member ${name} is encrypted`);
    if (method !== 0) {
      fail(
        `member ${name} is compressed (method ${method}${method === 8 ? ", deflate" : ""}); ` +
          `PyTorch stores its members uncompressed and only stored members are read`,
      );
    }
    if (compressed !== size) fail(`stored member ${name} has sizes ${compressed} and ${size}`);
    if (localAt + 30 > dirOffset) {
      fail(`member ${name}'s local header at ${localAt} is outside the data`);
    }
    const local = await file.read(localAt, 30);
    const lv = new DataView(local.buffer);
    if (lv.getUint32(0, true) !== LOCAL) fail(`no local header for member ${name} at ${localAt}`);
    const dataOffset = localAt + 30 + lv.getUint16(26, true) + lv.getUint16(28, true);
    if (dataOffset + size > dirOffset) {
      fail(`member ${name} (${size} bytes at ${dataOffset}) runs past the data into the directory`);
    }
    members.push({ name, dataOffset, size });
  }
  const sorted = [...members].sort((a, b) => a.dataOffset - b.dataOffset);
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i].dataOffset < sorted[i - 1].dataOffset + sorted[i - 1].size) {
      fail(`members ${sorted[i - 1].name} and ${sorted[i].name} overlap`);
    }
  }
  return members;
}

function big(v: bigint, fail: (why: string) => never): number {
  if (v > BigInt(Number.MAX_SAFE_INTEGER)) fail(`offset ${v} is too large`);
  return Number(v);
}
