/**
 * Files and directories of the embedded database opened without following a
 * symbolic link, then checked and changed through the open descriptor.
 *
 * `Deno.open`, `Deno.chmod` and `Deno.chown` all follow a symlink at the end
 * of the path, and Deno 2.9's `OpenOptions` have no `O_NOFOLLOW`. node:fs
 * takes numeric flags: its `openSync` returns a real descriptor (opened
 * `O_CLOEXEC`) with `fstatSync`, `fchmodSync` and `fchownSync` on it. But
 * `O_NOFOLLOW` holds only with `--allow-all`: under a permission set (`-P`,
 * as every task here runs) Deno 2.9.6 resolves the path for its permission
 * check and opens the resolved one, so a link to a file opens that file
 * (measured; with `-A` the same open fails with `ELOOP`). So every open here
 * passes `O_NOFOLLOW` and then compares the descriptor (`fstat`) with the
 * name (`lstat`): a link, or another file at the name, is refused before
 * anything is read or changed. A link cannot pass as the same file: that
 * would take a hard link (files here must have one) or a rename of the
 * target itself into place. The name is also looked at before the open
 * (`lstat`), so a link or a device planted ahead of time is refused without
 * being opened; `O_NONBLOCK` keeps a FIFO swapped in between from hanging
 * the open. Nothing is done by path after the check: what was checked is
 * what gets changed. A `flock` needs a `Deno.FsFile`, which cannot be made
 * from a descriptor, and Deno refuses `/proc/self/fd/<n>` without `--allow-all`; so
 * the lock file is created and checked through node:fs, then opened again by
 * `Deno.open` (no create, no truncate) and kept only when it is the same
 * file (device and inode). The caller has checked that no other account can
 * change the directory it is in (`safe_dir.ts`), so the two opens see one
 * name.
 *
 * Every refusal is a {@link DatabaseError} (code `UNSAFE_PATH`) naming the
 * path, what is wrong with it and what to do.
 *
 * @module
 */

import fs from "node:fs";
import { DatabaseError } from "./database.ts";
import { concatBytes } from "../bytes/mod.ts";

const { O_RDONLY, O_RDWR, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_DIRECTORY } =
  fs.constants;

/** Who may own a checked object, and what it becomes. */
export interface Ownership {
  /** The owner and group it is given (by `fchown`). */
  uid: number;
  gid: number;
  /** The permission bits it is given (by `fchmod`). */
  mode: number;
  /** Owners accepted on an existing object (besides `uid`); anyone else's is refused. */
  accept?: readonly number[];
}

/** A refusal: `path` is not what the embedded database may use. */
export function unsafePath(path: string, why: string, fix: string): DatabaseError {
  return new DatabaseError(`refusing ${path}: ${why}; ${fix}`, "UNSAFE_PATH", true);
}

/** The OS error code of a node:fs error (`ELOOP`, `ENOENT`, …), or undefined. */
function errno(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

function linkRefusal(path: string): DatabaseError {
  return unsafePath(
    path,
    `it is a symbolic link (to ${readLinkOr(path)}), and links are never followed here`,
    "remove the link; the program creates what it needs",
  );
}

/**
 * `open(2)` with `O_NOFOLLOW | O_NONBLOCK` of a `kind` (or a name not there
 * yet), kept only when the descriptor is the file the name holds (see the
 * module documentation); a link at `path` becomes a refusal naming it.
 */
function openNoFollow(
  path: string,
  kind: "file" | "directory",
  flags: number,
  mode?: number,
): number {
  const before = lstatOrUndefined(path);
  if (before?.isSymlink) throw linkRefusal(path);
  if (before && !(kind === "file" ? before.isFile : before.isDirectory)) throw notA(path, kind);
  let fd: number;
  try {
    fd = fs.openSync(path, flags | O_NOFOLLOW | O_NONBLOCK, mode);
  } catch (error) {
    // ELOOP for a link, ENOTDIR for O_DIRECTORY on a link to a directory,
    // ENOENT for a dangling link that Deno resolved.
    if (lstatOrUndefined(path)?.isSymlink) throw linkRefusal(path);
    throw error;
  }
  const opened = fs.fstatSync(fd);
  const named = lstatOrUndefined(path);
  if (named?.isSymlink || named?.ino !== opened.ino || named?.dev !== opened.dev) {
    fs.closeSync(fd);
    if (named?.isSymlink) throw linkRefusal(path);
    throw unsafePath(
      path,
      "it was replaced while being opened",
      "find out which process changes it; no other account should be able to",
    );
  }
  return fd;
}

function lstatOrUndefined(path: string): Deno.FileInfo | undefined {
  try {
    return Deno.lstatSync(path);
  } catch {
    return undefined;
  }
}

function readLinkOr(path: string): string {
  try {
    return Deno.readLinkSync(path);
  } catch {
    return "?";
  }
}

/** The login name of `uid` (from /etc/passwd), or undefined when it has none. */
export function userName(uid: number): string | undefined {
  try {
    for (const line of Deno.readTextFileSync("/etc/passwd").split("\n")) {
      const fields = line.split(":");
      if (fields.length >= 3 && fields[2] !== "" && Number(fields[2]) === uid) return fields[0];
    }
  } catch {
    // no passwd file: the number alone
  }
  return undefined;
}

/** `name (uid N)`, or `uid N` when the account has no name, for messages. */
export function accountName(uid: number): string {
  const name = userName(uid);
  return name ? `${name} (uid ${uid})` : `uid ${uid}`;
}

function notA(path: string, kind: "file" | "directory"): DatabaseError {
  return unsafePath(path, `it is not a ${kind}`, "remove it; the program creates what it needs");
}

/** Refuses `stat` unless it is of `kind`, owned by an accepted account and (files) has one link. */
function checkOpened(
  path: string,
  stat: fs.Stats,
  kind: "file" | "directory",
  owners: readonly number[],
): void {
  if (kind === "file" ? !stat.isFile() : !stat.isDirectory()) throw notA(path, kind);
  if (!owners.includes(stat.uid)) {
    throw unsafePath(
      path,
      `it is owned by ${accountName(stat.uid)}, not by ${
        [...new Set(owners)].map(accountName).join(" or ")
      }`,
      "remove it (another account may have planted it) or give it back to its owner",
    );
  }
  // A second name elsewhere would let a change here reach a file outside.
  if (kind === "file" && stat.nlink !== 1) {
    throw unsafePath(
      path,
      `it has ${stat.nlink} hard links, so it is also a file elsewhere`,
      "remove it; the program creates what it needs",
    );
  }
}

function owners(own: Ownership): number[] {
  return [own.uid, ...(own.accept ?? [])];
}

/** fchown/fchmod of an open descriptor to `own`, where it differs. */
function apply(fd: number, stat: fs.Stats, own: Ownership): void {
  if (stat.uid !== own.uid || stat.gid !== own.gid) fs.fchownSync(fd, own.uid, own.gid);
  if ((stat.mode & 0o7777) !== own.mode) fs.fchmodSync(fd, own.mode);
}

/**
 * Makes `path` a directory owned and moded as `own` says: created when
 * missing (`mkdir` never follows a link), then opened `O_DIRECTORY |
 * O_NOFOLLOW`, checked (a directory, owned by an accepted account) and
 * changed through the descriptor.
 *
 * @returns the owner it had before (`own.uid` when it was just created)
 */
export function ownedDirectory(path: string, own: Ownership): number {
  try {
    Deno.mkdirSync(path, { mode: 0o700 });
  } catch (error) {
    if (!(error instanceof Deno.errors.AlreadyExists)) throw error;
  }
  const fd = openNoFollow(path, "directory", O_RDONLY | O_DIRECTORY);
  try {
    const stat = fs.fstatSync(fd);
    checkOpened(path, stat, "directory", owners(own));
    apply(fd, stat, own);
    return stat.uid;
  } finally {
    fs.closeSync(fd);
  }
}

/** {@link openNoFollow} of a file for reading; undefined when there is none. */
function openExistingFile(path: string): number | undefined {
  try {
    return openNoFollow(path, "file", O_RDONLY);
  } catch (error) {
    if (errno(error) === "ENOENT") return undefined;
    throw error;
  }
}

/**
 * Gives the existing regular file `path` the ownership and mode of `own`
 * (through an `O_NOFOLLOW` descriptor, after the checks of {@link ownedDirectory}
 * and a link count of one). Missing: returns false.
 */
export function ownedFile(path: string, own: Ownership): boolean {
  const fd = openExistingFile(path);
  if (fd === undefined) return false;
  try {
    const stat = fs.fstatSync(fd);
    checkOpened(path, stat, "file", owners(own));
    apply(fd, stat, own);
    return true;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * The text of the regular file `path`, read without following a link, or
 * undefined when there is none. Refused when owned by anyone outside
 * `accept` or linked elsewhere.
 */
export function readNoFollow(path: string, accept: readonly number[]): string | undefined {
  const fd = openExistingFile(path);
  if (fd === undefined) return undefined;
  try {
    checkOpened(path, fs.fstatSync(fd), "file", accept);
    const chunks: Uint8Array[] = [];
    for (;;) {
      const chunk = new Uint8Array(4096);
      const n = fs.readSync(fd, chunk, 0, chunk.length, null);
      if (n === 0) break;
      chunks.push(chunk.subarray(0, n));
    }
    return new TextDecoder().decode(concatBytes(chunks));
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Creates `path` (`O_CREAT | O_EXCL | O_NOFOLLOW`: it must not exist, not
 * even as a link), gives it `own` through the descriptor, writes `text` and
 * syncs it.
 */
export function writeNewFile(path: string, text: string, own: Ownership): void {
  const fd = openNoFollow(path, "file", O_WRONLY | O_CREAT | O_EXCL, own.mode);
  try {
    apply(fd, fs.fstatSync(fd), own);
    const bytes = new TextEncoder().encode(text);
    let written = 0;
    while (written < bytes.length) {
      written += fs.writeSync(fd, bytes, written, bytes.length - written);
    }
    fs.fsyncSync(fd);
  } catch (error) {
    // A full disk, say: nothing half-written is left, and the message says where.
    fs.closeSync(fd);
    try {
      Deno.removeSync(path);
    } catch {
      // already gone
    }
    throw new Error(`could not write ${path}: ${(error as Error)?.message ?? error}`);
  }
  fs.closeSync(fd);
}

/**
 * Opens (creating when missing, 0600) the lock file `path` for reading and
 * writing without following a link, checks it is a regular file of `uid`'s
 * with one link, and returns it as a `Deno.FsFile` (which can `flock`):
 * opened again and compared with the file checked, as the module
 * documentation explains.
 */
export function openLockFile(path: string, uid: number, gid: number): Deno.FsFile {
  const fd = openNoFollow(path, "file", O_RDWR | O_CREAT, 0o600);
  try {
    const stat = fs.fstatSync(fd);
    checkOpened(path, stat, "file", [uid]);
    apply(fd, stat, { uid, gid, mode: 0o600 });
    const file = Deno.openSync(path, { read: true, write: true });
    const reopened = file.statSync();
    if (reopened.ino !== stat.ino || reopened.dev !== stat.dev) {
      file.close();
      throw unsafePath(
        path,
        "it was replaced while being opened",
        "find out which process changes it; no other account should be able to",
      );
    }
    return file;
  } finally {
    fs.closeSync(fd);
  }
}
