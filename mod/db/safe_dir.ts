/**
 * The directory that holds the embedded database (`server.data_dir`) must be
 * one no other account can change, as OpenSSH's StrictModes refuses an
 * `authorized_keys` whose directories another user could write (OpenSSH
 * misc.c `safe_path`): otherwise that account could plant links where the
 * program creates its lock and cluster, and a server run as root would write
 * and chown files of its choosing.
 *
 * The path is walked from `/` one name at a time, as the kernel resolves it:
 *
 * - every directory on the way must belong to root or to this process's
 *   user, and must not be writable by its group or by others. The one
 *   exception is a sticky directory that belongs to root or this user (`/tmp`,
 *   mode 1777), and only above the data directory: the sticky bit keeps
 *   others from renaming or removing the entries made there, and the next
 *   name must then itself belong to root or this user. A sticky directory of
 *   another account does not count (its owner may remove anything in it),
 *   nor does a sticky data directory (others could still create entries in
 *   it);
 * - a symbolic link on the way must belong to root or this user (in a sticky
 *   directory another account may own a link and re-point it at will); it is
 *   followed, and its target is checked the same way;
 * - missing directories are created (0755, never following a link) and
 *   checked like the rest.
 *
 * The result is the path with every link resolved; the caller works under it,
 * so a link changed after the check is never followed again.
 *
 * @module
 */

import { isAbsolute, join } from "node:path";
import { accountName, unsafePath, userName } from "./no_follow.ts";

/** Links followed before giving up (Linux's own limit, `MAXSYMLINKS`). */
const MAX_LINKS = 40;

function octal(mode: number): string {
  return (mode & 0o7777).toString(8).padStart(3, "0");
}

/**
 * Checks (creating what is missing) that `dir` can only be changed by root
 * or `uid`, as described in the module documentation.
 *
 * @param dir absolute path of the data directory
 * @param uid this process's user id
 * @returns `dir` with every symbolic link resolved
 * @throws DatabaseError (`UNSAFE_PATH`) naming the directory or link at fault, why, and what to do
 */
export function safeDataDir(dir: string, uid: number): string {
  if (!isAbsolute(dir)) throw new Error(`safeDataDir needs an absolute path, got ${dir}`);
  const trusted = [...new Set([0, uid])];
  const me = userName(uid) ?? String(uid);
  const context = `on the way to the data directory ${dir}`;
  const elsewhere = `set server.data_dir to a directory that only ${
    trusted.map((id) => userName(id) ?? `uid ${id}`).join(" and ")
  } can change`;
  const pending = dir.split("/").filter((name) => name !== "" && name !== ".");
  let real = "/";
  let links = 0;
  let checked = "/";
  checkDirectory("/", Deno.lstatSync("/"), pending.length === 0);
  while (pending.length > 0) {
    const name = pending.shift()!;
    if (name === "..") {
      // `real` holds no links, so its parent is the textual one.
      real = join(real, "..");
      continue;
    }
    const path = join(real, name);
    let info: Deno.FileInfo;
    try {
      info = Deno.lstatSync(path);
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
      try {
        Deno.mkdirSync(path, { mode: 0o755 });
      } catch (made) {
        if (!(made instanceof Deno.errors.AlreadyExists)) throw made;
      }
      info = Deno.lstatSync(path);
    }
    if (info.isSymlink) {
      if (!trusted.includes(info.uid!)) {
        throw unsafePath(
          path,
          `it is a symbolic link ${context}, owned by ${
            accountName(info.uid!)
          }, who can re-point it at any directory`,
          `remove it, point server.data_dir at its target (${
            Deno.readLinkSync(path)
          }) instead, or ${elsewhere}`,
        );
      }
      if (++links > MAX_LINKS) {
        throw unsafePath(path, `more than ${MAX_LINKS} symbolic links ${context}`, elsewhere);
      }
      const target = Deno.readLinkSync(path);
      if (isAbsolute(target)) real = "/";
      pending.unshift(...target.split("/").filter((part) => part !== "" && part !== "."));
      continue;
    }
    if (!info.isDirectory) {
      throw unsafePath(path, `it is not a directory (${context})`, elsewhere);
    }
    checkDirectory(path, info, pending.length === 0);
    real = checked = path;
  }
  // Reached through a ".." at the end: the last directory was checked as one on the way.
  if (checked !== real) checkDirectory(real, Deno.lstatSync(real), true);
  return real;

  function checkDirectory(path: string, info: Deno.FileInfo, last: boolean): void {
    const mode = info.mode ?? 0;
    const where = last ? "it is the data directory" : `it is a directory ${context}`;
    if (!trusted.includes(info.uid!)) {
      const sticky = (mode & 0o1000) !== 0 && (mode & 0o022) !== 0
        ? " (a sticky bit does not stop a directory's own owner)"
        : "";
      throw unsafePath(
        path,
        `${where}, owned by ${
          accountName(info.uid!)
        }${sticky}, so that account could put links where the lock and the cluster go`,
        `give it to ${me} (chown ${me} ${path}), or ${elsewhere}`,
      );
    }
    const writable = mode & 0o022;
    if (writable === 0) return;
    if ((mode & 0o1000) !== 0 && !last) return;
    const by = writable === 0o022
      ? "its group and by all users"
      : writable === 0o020
      ? "its group"
      : "all users";
    const sticky = (mode & 0o1000) !== 0
      ? "; the sticky bit stops others from removing entries, not from creating them"
      : "";
    throw unsafePath(
      path,
      `${where}, writable by ${by} (mode ${
        octal(mode)
      })${sticky}, so another account could put links where the lock and the cluster go`,
      `chmod go-w ${path}, or ${elsewhere}`,
    );
  }
}
