/**
 * What real MCP clients show a person when this server refuses their
 * credentials, and what they negotiate when it accepts them.
 *
 * Installs the clients from npm into a cache folder (`.cache/clients`,
 * ignored by git; `--cache DIR` moves it): Claude Code
 * (`@anthropic-ai/claude-code`), Gemini CLI (`@google/gemini-cli`), OpenCode
 * (`opencode-ai`), Codex (`@openai/codex`) and `mcp-remote`, at the versions
 * in {@link CLIENTS} (`--latest` takes npm's current releases instead).
 * Starts the server in-process over HTTP in the `production` environment
 * (so `X-MCP-Token` is required) on the tiny model set, its keys in a test
 * database (embedded PostgreSQL, or `DATABASE_URL`), and a recording proxy in
 * front of it on loopback, so every request a client sends (OAuth discovery
 * included) is seen with the answer's status.
 *
 * Each client gets a temporary HOME whose config registers four servers, one
 * per case: a wrong key (another real key's prefix with a wrong secret), a revoked
 * key, a correct key without `X-MCP-Token`, and a correct key with it. Only
 * commands that never reach a model provider run: `claude mcp list`,
 * `gemini mcp list`, `opencode mcp list`, Codex's app-server
 * (`mcpServerStatus/list` over JSON-RPC on stdio), and an MCP SDK client
 * (v1.32, `listTools`) through `mcp-remote`. Nothing but the npm registry
 * and loopback is reached; a client that tries more (telemetry, updates)
 * finds no route on an offline machine, and the environment asks each not to.
 *
 * Prints, per client and case, what the client showed (its lines about that
 * server), the requests it sent (OAuth probes counted), the revision it
 * negotiated and whether it declared the tasks extension, as Markdown (the
 * README's client table was written from it) and, with `--json FILE`, as
 * JSON.
 *
 * Run: `deno run -P=test bench/clients.ts [--latest] [--cache DIR] [--json FILE]`
 * (about two minutes on 2 cores once the clients are installed).
 *
 * @module
 */

import { join } from "node:path";
import { parseArgs } from "node:util";
import { createKey } from "../mod/auth/create_key.ts";
import { revokeKey } from "../mod/auth/key_store.ts";
import { startApp } from "../mod/app/mod.ts";
import { loadConfig } from "../mod/config/mod.ts";
import { setLogLevel } from "../mod/log/mod.ts";
import { Client, StdioClientTransport } from "../mod/mcp/client_sdk.ts";
import { buildTinyModelSet } from "../tests/fixtures/builder/mod.ts";
import { openTestDatabase } from "../tests/helpers/postgres.ts";
import { ROOT } from "../tests/helpers/paths.ts";
import { writeTinyConfig } from "../tests/helpers/tiny_config.ts";

/** The clients measured: npm package, version measured, command in `node_modules/.bin`. */
export const CLIENTS = [
  { id: "claude", name: "Claude Code", pkg: "@anthropic-ai/claude-code", version: "2.1.332" },
  { id: "gemini", name: "Gemini CLI", pkg: "@google/gemini-cli", version: "0.61.0" },
  { id: "opencode", name: "OpenCode", pkg: "opencode-ai", version: "1.18.33" },
  { id: "codex", name: "Codex", pkg: "@openai/codex", version: "0.171.0" },
  { id: "mcp-remote", name: "mcp-remote", pkg: "mcp-remote", version: "0.15.1" },
] as const;

/** A client's id in {@link CLIENTS}. */
export type ClientId = typeof CLIENTS[number]["id"];

/** The credential cases, each registered as its own server in every client. */
export const CASES = ["wrong", "revoked", "notoken", "ok"] as const;

/** One credential case. */
export type CaseId = typeof CASES[number];

/** What a case sends, for the report. */
const CASE_LABEL: Record<CaseId, string> = {
  wrong: "wrong key",
  revoked: "revoked key",
  notoken: "no X-MCP-Token",
  ok: "correct key",
};

/** Longest a client's list command may run. */
const RUN_TIMEOUT_MS = 120_000;

/** One request the proxy saw. */
interface Seen {
  client: string;
  case: string;
  method: string;
  path: string;
  status: number;
  /** Whether the request carried the case's credentials (a key header). */
  keyed: boolean;
  rpc?: string;
  protocolVersion?: string;
  tasks?: boolean;
  capabilities?: string[];
  negotiated?: string;
}

/** What one client showed for one case. */
interface CaseResult {
  shown: string;
  requests: string[];
  oauthProbes: number;
  negotiated?: string;
  tasks?: boolean;
  capabilities?: string[];
}

const args = parseArgs({
  args: Deno.args,
  options: {
    latest: { type: "boolean", default: false },
    cache: { type: "string", default: join(ROOT, ".cache/clients") },
    json: { type: "string" },
    only: { type: "string" },
  },
});
const cache = args.values.cache!;
const only = args.values.only?.split(",");

/** Runs a command, returning its exit code and output; kills it after `timeoutMs`. */
async function run(
  cmd: string,
  argv: string[],
  options: { env?: Record<string, string>; cwd?: string; timeoutMs?: number } = {},
): Promise<{ code: number; out: string; timedOut: boolean }> {
  const child = new Deno.Command(cmd, {
    args: argv,
    cwd: options.cwd,
    env: options.env,
    clearEnv: options.env !== undefined,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
  }, options.timeoutMs ?? RUN_TIMEOUT_MS);
  const output = await child.output();
  clearTimeout(timer);
  const text = new TextDecoder().decode(output.stdout) + new TextDecoder().decode(output.stderr);
  return { code: output.code, out: text, timedOut };
}

/** Installs the clients into the cache with npm, unless the wanted versions are there. */
async function install(): Promise<Record<string, string>> {
  await Deno.mkdir(cache, { recursive: true });
  const manifest = join(cache, "package.json");
  try {
    await Deno.stat(manifest);
  } catch {
    await Deno.writeTextFile(manifest, '{ "private": true }\n');
  }
  const wanted = CLIENTS.map((c) => `${c.pkg}@${args.values.latest ? "latest" : c.version}`);
  const installed = await installedVersions();
  const missing = CLIENTS.some((c) => args.values.latest || installed[c.id] !== c.version);
  if (missing) {
    console.error(`npm install ${wanted.join(" ")} (into ${cache})`);
    const r = await run("npm", ["install", "--no-audit", "--no-fund", ...wanted], {
      cwd: cache,
      timeoutMs: 900_000,
    });
    if (r.code !== 0) throw new Error(`npm install failed:\n${r.out}`);
  }
  return await installedVersions();
}

/** The installed version of each client (its package.json). */
async function installedVersions(): Promise<Record<string, string>> {
  const versions: Record<string, string> = {};
  for (const c of CLIENTS) {
    try {
      const text = await Deno.readTextFile(join(cache, "node_modules", c.pkg, "package.json"));
      versions[c.id] = JSON.parse(text).version;
    } catch { /* not installed */ }
  }
  return versions;
}

const bin = (name: string) => join(cache, "node_modules/.bin", name);

// ---------------------------------------------------------------- the server

await buildTinyModelSet(join(ROOT, "tests/fixtures/tiny/models"));
const versions = await install();
setLogLevel("warn");
const tdb = await openTestDatabase("clients_bench");
const secret = `cf-${crypto.randomUUID()}`;
const good = await createKey(tdb.db, { projectId: 1, userId: 1, permission: "write" });
const revoked = await createKey(tdb.db, { projectId: 1, userId: 1, permission: "write" });
// The wrong key is another real key's prefix with a wrong secret: wrong secrets spend
// that prefix's failure budget per address, which must not lock out the correct key.
const other = await createKey(tdb.db, { projectId: 1, userId: 1, permission: "write" });
await revokeKey(tdb.db, revoked.prefix);
const temp = await writeTinyConfig("", { environment: "production" });
const config = await loadConfig({
  path: temp.path,
  overrides: { transport: "http" },
  env: { DATABASE_URL: tdb.url, CLOUDFRONT_SECRET_HEADER: secret },
});
const app = await startApp(config);
const upstream = `http://127.0.0.1:${app.http!.port}`;

/** The headers each case's server entry sends. */
function caseHeaders(c: CaseId): Record<string, string> {
  const wrongKey = `${other.key.slice(0, other.key.lastIndexOf("_") + 1)}${"x".repeat(32)}`;
  switch (c) {
    case "wrong":
      return { "MCP-API-Key": wrongKey, "X-MCP-Token": secret };
    case "revoked":
      return { "MCP-API-Key": revoked.key, "X-MCP-Token": secret };
    case "notoken":
      return { "MCP-API-Key": good.key };
    case "ok":
      return { "MCP-API-Key": good.key, "X-MCP-Token": secret };
  }
}

// ---------------------------------------------------------- recording proxy

const seen: Seen[] = [];
let current = "";
// Cases travel as opaque path segments: Claude Code redacts the words of a server's
// URL from the errors it shows, so a segment named "revoked" hid that word.
const ROUTE = /\/c\/([a-z-]+)\/s([0-9])(?=\/|$)/;

/** Forwards `/c/<client>/<case>/…` to the server's `/…`, recording each exchange. */
const proxy = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
  const url = new URL(req.url);
  const match = ROUTE.exec(url.pathname);
  const path = match ? url.pathname.replace(match[0], "") || "/" : url.pathname;
  const body = req.method === "GET" || req.method === "HEAD" ? undefined : await req.arrayBuffer();
  const record: Seen = {
    client: match?.[1] ?? current,
    case: match ? CASES[Number(match[2])] : "?",
    method: req.method,
    path: url.pathname,
    status: 0,
    keyed: req.headers.has("mcp-api-key") || req.headers.has("authorization"),
  };
  let message: Record<string, unknown> | undefined;
  try {
    message = body ? JSON.parse(new TextDecoder().decode(body)) : undefined;
  } catch { /* not JSON */ }
  if (message) {
    const params = (message.params ?? {}) as Record<string, unknown>;
    const meta = (params._meta ?? {}) as Record<string, unknown>;
    record.rpc = String(message.method ?? "(response)");
    const capabilities = (params.capabilities ??
      meta["io.modelcontextprotocol/clientCapabilities"]) as Record<string, unknown> | undefined;
    record.protocolVersion = (params.protocolVersion ??
      meta["io.modelcontextprotocol/protocolVersion"] ??
      req.headers.get("mcp-protocol-version") ?? undefined) as string | undefined;
    if (capabilities) {
      record.capabilities = Object.keys(capabilities);
      const extensions = (capabilities.extensions ?? {}) as Record<string, unknown>;
      record.tasks = "tasks" in capabilities || "io.modelcontextprotocol/tasks" in extensions;
    }
  }
  const headers = new Headers(req.headers);
  headers.delete("host");
  const response = await fetch(upstream + path + url.search, {
    method: req.method,
    headers,
    body,
    redirect: "manual",
  });
  record.status = response.status;
  seen.push(record);
  if (record.rpc === "initialize" || record.rpc === "server/discover") {
    // Small answers: read whole for the revision the server agreed to.
    const text = await response.text();
    record.negotiated = /"protocolVersion"\s*:\s*"([^"]+)"/.exec(text)?.[1] ??
      /"supportedVersions"\s*:\s*\[\s*"([^"]+)"/.exec(text)?.[1];
    return new Response(text, { status: response.status, headers: response.headers });
  }
  return new Response(response.body, { status: response.status, headers: response.headers });
});
const proxyBase = `http://127.0.0.1:${proxy.addr.port}`;
const caseUrl = (client: string, c: CaseId) => `${proxyBase}/c/${client}/s${CASES.indexOf(c)}/mcp`;
const serverName = (c: CaseId) => `sd-${c}`;

// ------------------------------------------------------------------ clients

/** The temporary HOMEs made, removed at the end. */
const homes: string[] = [];

/** A fresh HOME and the environment a client runs in (no telemetry, no updates). */
async function home(client: string) {
  const dir = await Deno.makeTempDir({ prefix: `clients-${client}-` });
  homes.push(dir);
  const env: Record<string, string> = {
    HOME: dir,
    PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    TERM: "dumb",
    NO_COLOR: "1",
    CI: "1",
    XDG_CONFIG_HOME: join(dir, ".config"),
    XDG_DATA_HOME: join(dir, ".local/share"),
    XDG_CACHE_HOME: join(dir, ".cache"),
    XDG_STATE_HOME: join(dir, ".local/state"),
    DISABLE_AUTOUPDATER: "1",
    DISABLE_TELEMETRY: "1",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    GEMINI_CLI_NO_RELAUNCH: "true",
    OPENCODE_DISABLE_AUTOUPDATE: "1",
    OPENCODE_DISABLE_MODELS_FETCH: "1",
    OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
    CODEX_HOME: join(dir, ".codex"),
  };
  return { dir, env };
}

/** The lines of `out` that mention server `name` (and the indented lines under them). */
function linesAbout(out: string, name: string): string {
  const lines = out.split("\n");
  const picked: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!new RegExp(`\\b${name}\\b`).test(lines[i])) continue;
    picked.push(lines[i].trim());
    for (let j = i + 1; j < lines.length && /^\s{2,}\S/.test(lines[j]); j++) {
      picked.push(lines[j].trim());
    }
  }
  return picked.join(" / ");
}

/** `claude mcp add` for each case, then `claude mcp list`. */
async function claude(): Promise<Record<CaseId, string>> {
  const { dir, env } = await home("claude");
  for (const c of CASES) {
    const headers = Object.entries(caseHeaders(c)).flatMap(([k, v]) => ["--header", `${k}: ${v}`]);
    const r = await run(bin("claude"), [
      "mcp",
      "add",
      "--scope",
      "user",
      "--transport",
      "http",
      serverName(c),
      caseUrl("claude", c),
      ...headers,
    ], { env, cwd: dir });
    if (r.code !== 0) throw new Error(`claude mcp add: ${r.out}`);
  }
  const list = await run(bin("claude"), ["mcp", "list"], { env, cwd: dir });
  return perCase(list.out, list.timedOut);
}

/** `~/.gemini/settings.json` with an `httpUrl` entry per case, then `gemini mcp list`. */
async function gemini(): Promise<Record<CaseId, string>> {
  const { dir, env } = await home("gemini");
  await Deno.mkdir(join(dir, ".gemini"), { recursive: true });
  const mcpServers = Object.fromEntries(
    CASES.map((c) => [serverName(c), { httpUrl: caseUrl("gemini", c), headers: caseHeaders(c) }]),
  );
  await Deno.writeTextFile(
    join(dir, ".gemini/settings.json"),
    JSON.stringify({ mcpServers, security: { folderTrust: { enabled: false } } }, null, 2),
  );
  const list = await run("node", [bin("gemini"), "mcp", "list"], { env, cwd: dir });
  return perCase(list.out, list.timedOut);
}

/** `opencode.json` with a `remote` entry per case, then `opencode mcp list`. */
async function opencode(): Promise<Record<CaseId, string>> {
  const { dir, env } = await home("opencode");
  await Deno.mkdir(join(dir, ".config/opencode"), { recursive: true });
  const mcp = Object.fromEntries(
    CASES.map((
      c,
    ) => [serverName(c), { type: "remote", url: caseUrl("opencode", c), headers: caseHeaders(c) }]),
  );
  await Deno.writeTextFile(
    join(dir, ".config/opencode/opencode.json"),
    JSON.stringify({ $schema: "https://opencode.ai/config.json", mcp, autoupdate: false }, null, 2),
  );
  const list = await run(bin("opencode"), ["mcp", "list"], { env, cwd: dir });
  const shown = perCase(list.out, list.timedOut);
  // `mcp list` gives a status word; `mcp debug NAME` tries the connection and OAuth and
  // prints what went wrong, which is where an OpenCode user reads a reason.
  for (const c of CASES) {
    if (c === "ok") continue;
    const debug = await run(bin("opencode"), ["mcp", "debug", serverName(c)], { env, cwd: dir });
    const lines = stripColour(debug.out).split("\n").map((l) =>
      l.replace(/^[│●■◇└┌\s]+/, "").trim()
    )
      .filter((l) => /^(HTTP response|WWW-Authenticate|Connection error|Error)/.test(l));
    shown[c] += `; \`opencode mcp debug\`: ${lines.join(" / ") || debug.out.trim().slice(-300)}`;
  }
  return shown;
}

/** `text` without terminal colour and cursor codes. */
function stripColour(text: string): string {
  // deno-lint-ignore no-control-regex -- terminal escape sequences
  return text.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, "");
}

/** Splits a list command's output into what it said about each case's server. */
function perCase(out: string, timedOut: boolean): Record<CaseId, string> {
  const plain = stripColour(out);
  return Object.fromEntries(
    CASES.map((c) => [
      c,
      linesAbout(plain, serverName(c)) ||
      `(nothing about this server${timedOut ? "; the command timed out" : ""}: ${
        plain.trim().slice(-300)
      })`,
    ]),
  ) as Record<CaseId, string>;
}

/** `~/.codex/config.toml` with an HTTP entry per case; the app-server's `mcpServerStatus/list`. */
async function codex(): Promise<Record<CaseId, string>> {
  const { dir, env } = await home("codex");
  await Deno.mkdir(env.CODEX_HOME, { recursive: true });
  const toml = CASES.map((c) => {
    const headers = Object.entries(caseHeaders(c)).map(([k, v]) => `"${k}" = "${v}"`).join(", ");
    return `[mcp_servers.${serverName(c)}]\nurl = "${caseUrl("codex", c)}"\n` +
      `http_headers = { ${headers} }\n`;
  }).join("\n");
  await Deno.writeTextFile(join(env.CODEX_HOME, "config.toml"), toml);
  const child = new Deno.Command(bin("codex"), {
    args: ["app-server"],
    cwd: dir,
    env,
    clearEnv: true,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  const send = (m: unknown) => writer.write(new TextEncoder().encode(JSON.stringify(m) + "\n"));
  const notices: Record<string, string[]> = {};
  let statuses: Array<Record<string, unknown>> | undefined;
  let error = "";
  const stderr = new Response(child.stderr).text();
  const reading = (async () => {
    let buffer = "";
    for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
      buffer += chunk;
      let nl;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        let m: Record<string, unknown>;
        try {
          m = JSON.parse(line);
        } catch {
          continue;
        }
        const params = (m.params ?? {}) as Record<string, unknown>;
        if (typeof m.method === "string" && m.method.startsWith("mcpServer")) {
          const name = String(params.name ?? "");
          (notices[name] ??= []).push(
            [params.status, params.error, params.failureReason].filter((x) => x).join(": "),
          );
        }
        if (m.id === 2) {
          if (m.error) error = JSON.stringify(m.error);
          statuses = ((m.result ?? {}) as { data?: Array<Record<string, unknown>> }).data;
          return;
        }
      }
    }
  })();
  await send({
    id: 1,
    method: "initialize",
    params: {
      clientInfo: { name: "clients-bench", title: null, version: "0.0.0" },
      capabilities: null,
    },
  });
  await send({ method: "initialized" });
  await send({ id: 2, method: "mcpServerStatus/list", params: { detail: "toolsAndAuthOnly" } });
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([
    reading,
    new Promise((r) => timer = setTimeout(r, RUN_TIMEOUT_MS)),
  ]);
  clearTimeout(timer);
  await writer.close().catch(() => {});
  try {
    child.kill("SIGTERM");
  } catch { /* gone */ }
  await child.status;
  const log = await stderr;
  return Object.fromEntries(CASES.map((c) => {
    const status = statuses?.find((s) => s.name === serverName(c));
    const parts: string[] = [];
    if (status) {
      const tools = Object.keys((status.tools ?? {}) as object).length;
      parts.push(
        `authStatus ${status.authStatus}`,
        // rmcp's error names its transport's whole generic type: kept out of the report.
        status.toolsError
          ? `toolsError: ${String(status.toolsError).replace(/ Transport \[[^\]]*\]/g, "")}`
          : `${tools} tools`,
      );
    } else {
      parts.push(
        `(no status${error ? `: ${error}` : ""}${log ? `; stderr: ${log.slice(-300)}` : ""})`,
      );
    }
    if (notices[serverName(c)]?.length) parts.push(`events: ${notices[serverName(c)].join(" | ")}`);
    return [c, parts.join("; ")];
  })) as Record<CaseId, string>;
}

/** An MCP SDK client (v1.32) over stdio to `mcp-remote URL --header …`: connect, `tools/list`. */
async function mcpRemote(): Promise<Record<CaseId, string>> {
  const { dir, env } = await home("mcp-remote");
  const shown = {} as Record<CaseId, string>;
  for (const c of CASES) {
    const headers = Object.entries(caseHeaders(c)).flatMap(([k, v]) => ["--header", `${k}:${v}`]);
    const transport = new StdioClientTransport({
      command: "node",
      args: [
        join(cache, "node_modules/mcp-remote/dist/proxy.js"),
        caseUrl("mcp-remote", c),
        ...headers,
      ],
      cwd: dir,
      env,
      stderr: "pipe",
    });
    let log = "";
    transport.stderr?.on("data", (chunk: Uint8Array) => log += new TextDecoder().decode(chunk));
    const client = new Client({ name: "clients-bench", version: "0.0.0" });
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const listed = await Promise.race([
        client.connect(transport).then(() => client.listTools()),
        new Promise<never>((_, reject) =>
          timer = setTimeout(() => reject(new Error("no answer in 60 s")), 60_000)
        ),
      ]);
      shown[c] = `${listed.tools.length} tools`;
    } catch (error) {
      const lines = log.split("\n").map((l) => l.trim()).filter((l) =>
        /error|fail|40\d|50\d/i.test(l)
      );
      shown[c] = `SDK client: ${(error as Error).message.slice(0, 300)}; mcp-remote stderr: ${
        lines.slice(-3).join(" / ").slice(0, 400)
      }`;
    } finally {
      clearTimeout(timer);
      await client.close().catch(() => {});
      await transport.close().catch(() => {});
    }
  }
  return shown;
}

const RUNNERS: Record<ClientId, () => Promise<Record<CaseId, string>>> = {
  claude,
  gemini,
  opencode,
  codex,
  "mcp-remote": mcpRemote,
};

// ------------------------------------------------------------------- report

const report: Record<string, { version: string; cases: Record<string, CaseResult> }> = {};
try {
  for (const c of CLIENTS) {
    if (only && !only.includes(c.id)) continue;
    current = c.id;
    console.error(`${c.name} ${versions[c.id]} …`);
    const started = seen.length;
    let shown: Record<CaseId, string>;
    try {
      shown = await RUNNERS[c.id]();
    } catch (error) {
      const message = `(the client failed: ${(error as Error).message.slice(0, 300)})`;
      shown = Object.fromEntries(CASES.map((k) => [k, message])) as Record<CaseId, string>;
    }
    const mine = seen.slice(started).filter((s) => s.client === c.id);
    const cases: Record<string, CaseResult> = {};
    for (const k of CASES) {
      const requests = mine.filter((s) => s.case === k);
      const handshake = requests.find((s) => s.negotiated || s.capabilities);
      const any = requests.find((s) => s.protocolVersion && s.rpc !== "initialize");
      cases[k] = {
        shown: shown[k],
        requests: requests.map((s) =>
          `${s.method} ${s.path.replace(ROUTE, "")}${s.rpc ? ` ${s.rpc}` : ""} → ${s.status}`
        ),
        oauthProbes: requests.filter((s) =>
          /well-known|\/register|\/authorize|\/token/.test(s.path)
        )
          .length,
        negotiated: handshake?.negotiated ?? any?.protocolVersion,
        tasks: requests.find((s) => s.tasks !== undefined)?.tasks,
        capabilities: requests.find((s) => s.capabilities)?.capabilities,
      };
    }
    // Requests at the server's root (OAuth metadata, registration) name no case.
    const rootLevel = mine.filter((s) => s.case === "?");
    if (rootLevel.length) {
      console.error(
        `${c.id}: requests without a case path: ${
          [
            ...new Set(
              rootLevel.map((s) =>
                `${s.method} ${s.path} → ${s.status}${s.keyed ? " (key sent)" : ""}`
              ),
            ),
          ].join("; ")
        } (${rootLevel.length} in all)`,
      );
    }
    report[c.id] = { version: versions[c.id] ?? "?", cases };
  }
} finally {
  for (const dir of homes) await Deno.remove(dir, { recursive: true }).catch(() => {});
  await proxy.shutdown();
  await app.shutdown();
  await tdb.close();
  await temp.remove();
}

const md: string[] = [
  "| client | case | what the person sees | requests (OAuth probes) | revision | tasks |",
  "| --- | --- | --- | --- | --- | --- |",
];
for (const c of CLIENTS) {
  const r = report[c.id];
  if (!r) continue;
  for (const k of CASES) {
    const x = r.cases[k];
    md.push(
      `| ${c.name} ${r.version} | ${CASE_LABEL[k]} | ${
        x.shown.replaceAll("|", "\\|")
      } | ${x.requests.length} (${x.oauthProbes}) | ${x.negotiated ?? "—"} | ${
        x.tasks === undefined ? "—" : x.tasks ? "declared" : "not declared"
      } |`,
    );
  }
}
console.log(md.join("\n"));
for (const c of CLIENTS) {
  const r = report[c.id];
  if (!r) continue;
  for (const k of CASES) {
    console.error(`\n${c.id} ${k}: ${r.cases[k].requests.join("; ")}`);
    if (r.cases[k].capabilities) {
      console.error(`  capabilities: ${r.cases[k].capabilities!.join(", ")}`);
    }
  }
}
if (args.values.json) await Deno.writeTextFile(args.values.json, JSON.stringify(report, null, 2));
