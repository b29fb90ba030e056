/**
 * A database for tests: a fresh database on the PostgreSQL server named by
 * `DATABASE_URL` when it is set (so test files never collide), else the
 * embedded PostgreSQL default in a temporary directory. Either way postgres.js
 * reaches it through a {@link TcpProxy} (to the server's TCP port, or to the
 * embedded server's Unix socket), so a test can stop the database mid-run,
 * slow it down and bring it back.
 *
 * @module
 */

import { type Database, EmbeddedPostgres, openDatabase } from "../../mod/db/mod.ts";
import { registerSecret } from "./log_secrets.ts";
import { TcpProxy } from "./tcp_proxy.ts";

/** A migrated database behind a controllable proxy. */
export interface TestDatabase {
  /** `server` with `DATABASE_URL`, else `embedded`. */
  readonly mode: "server" | "embedded";
  /** Connected through the proxy, migrations applied. */
  readonly db: Database;
  /** DSN through the proxy (for subprocesses). Carries a password: never print it. */
  readonly url: string;
  /** DSN of the same database without the proxy. */
  readonly directUrl: string;
  /** The DSN password (tests check it never reaches a log line). */
  readonly password: string;
  /** Embedded mode: the cluster directory (another process may share it). */
  readonly embeddedDir?: string;
  /** Embedded mode: the cluster, to kill its server or read its state. */
  readonly embedded?: EmbeddedPostgres;
  /** Stops, slows and restores the database as the client sees it. */
  readonly proxy: TcpProxy;
  /** Opens another pool on the same database through the proxy. */
  connect(options?: PoolOptions): Promise<Database>;
  /** Closes everything and removes the database or its directory. */
  close(): Promise<void>;
}

/** Options of {@link TestDatabase.connect}. */
export interface PoolOptions {
  /** Pool size. */
  maxConnections?: number;
  /** Apply migrations (default true). */
  migrate?: boolean;
  /** The pool's bound on every statement (see `openDatabase`). */
  queryTimeoutMs?: number;
}

/** Whether tests run against a real PostgreSQL server (`DATABASE_URL` set). */
export function usingPostgresServer(): boolean {
  return Boolean(Deno.env.get("DATABASE_URL"));
}

function withDatabase(
  url: string,
  host: string,
  port: number,
  database: string,
  password: string,
): string {
  const parsed = new URL(url);
  parsed.hostname = host;
  parsed.port = String(port);
  parsed.pathname = `/${database}`;
  if (password) parsed.password = encodeURIComponent(password);
  return parsed.toString();
}

/**
 * Opens a fresh test database. `label` (letters, digits, `_`) names it, to
 * make leftovers traceable.
 */
export async function openTestDatabase(label: string): Promise<TestDatabase> {
  const serverUrl = Deno.env.get("DATABASE_URL");
  if (serverUrl) return await openOnServer(serverUrl, label);
  return await openEmbedded();
}

async function openOnServer(serverUrl: string, label: string): Promise<TestDatabase> {
  const admin = await openDatabase({
    url: serverUrl,
    embeddedDir: "",
    migrate: false,
    maxConnections: 1,
  });
  const suffix = crypto.randomUUID().replaceAll("-", "").slice(0, 10);
  const name = `sdmcp_t_${label.toLowerCase().replace(/[^a-z0-9_]/g, "_").slice(0, 30)}_${suffix}`;
  await admin.query(`CREATE DATABASE "${name}"`);
  const parsed = new URL(serverUrl);
  const password = decodeURIComponent(parsed.password);
  registerSecret(password);
  const proxy = TcpProxy.start({ hostname: parsed.hostname, port: Number(parsed.port || 5432) });
  const url = withDatabase(serverUrl, "127.0.0.1", proxy.port, name, password);
  const directUrl = withDatabase(
    serverUrl,
    parsed.hostname,
    Number(parsed.port || 5432),
    name,
    password,
  );
  const pools: Database[] = [];
  const connect = async (options: PoolOptions = {}) => {
    const db = await openDatabase({ url, embeddedDir: "", ...options });
    pools.push(db);
    return db;
  };
  const db = await connect();
  return {
    mode: "server",
    db,
    url,
    directUrl,
    password,
    proxy,
    connect,
    async close() {
      for (const pool of pools) await pool.close().catch(() => {});
      await proxy.close();
      try {
        await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await admin.close();
      }
    },
  };
}

/**
 * A temporary directory the embedded server can reach: when tests run as
 * root, PostgreSQL runs as the `postgres` user, which must be able to search
 * it (makeTempDir creates 0700).
 */
export async function makeReachableTempDir(prefix: string): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix });
  await Deno.chmod(dir, 0o711);
  return dir;
}

/**
 * Opens the embedded default in a fresh temporary directory, whatever
 * `DATABASE_URL` says (CI sets it; the embedded default is tested too).
 */
export async function openEmbedded(): Promise<TestDatabase> {
  const dir = await makeReachableTempDir("sdmcp-test-");
  const embeddedDir = `${dir}/postgres`;
  const embedded = new EmbeddedPostgres(embeddedDir);
  const endpoint = await embedded.endpoint();
  // The embedded server has no TCP port; the proxy gives tests (and
  // subprocesses) a DSN to it, with its real password.
  const proxy = TcpProxy.start({ path: endpoint.socketPath });
  const password = endpoint.password;
  registerSecret(password);
  const url = `postgres://postgres:${password}@127.0.0.1:${proxy.port}/postgres`;
  const directUrl = url;
  const pools: Database[] = [];
  const connect = async (options: PoolOptions = {}) => {
    const db = await openDatabase({ url, embeddedDir, ...options });
    pools.push(db);
    return db;
  };
  const db = await connect();
  return {
    mode: "embedded",
    db,
    url,
    directUrl,
    password,
    embeddedDir,
    embedded,
    proxy,
    connect,
    async close() {
      for (const pool of pools) await pool.close().catch(() => {});
      await proxy.close();
      await embedded.close();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}
