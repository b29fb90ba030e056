import assert from "node:assert/strict";
import { join } from "node:path";
import { parse as parseToml } from "smol-toml";
import { ConfigError, loadConfig } from "./mod.ts";
import { RawConfigSchema } from "./schema.ts";

const repoConfig = new URL("../../config.toml", import.meta.url).pathname;

async function withConfig(text: string, fn: (path: string) => Promise<void>) {
  const dir = await Deno.makeTempDir();
  const path = join(dir, "config.toml");
  await Deno.writeTextFile(path, text);
  try {
    await fn(path);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function configError(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof ConfigError, `expected ConfigError, got ${error}`);
    return error.message;
  }
  assert.fail("expected the config to be refused");
}

function keyPaths(value: unknown, prefix = ""): string[] {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return [prefix];
  return Object.entries(value).flatMap(([k, v]) => keyPaths(v, prefix ? `${prefix}.${k}` : k));
}

Deno.test("config.toml in the repository lists every key with its default", async () => {
  const fileRaw = parseToml(await Deno.readTextFile(repoConfig));
  const defaults = RawConfigSchema.parse({});
  assert.deepEqual(keyPaths(fileRaw).sort(), keyPaths(defaults).sort());
  assert.deepEqual(RawConfigSchema.parse(fileRaw), defaults);
});

Deno.test("every key of config.toml has a one-line comment", async () => {
  const lines = (await Deno.readTextFile(repoConfig)).split("\n");
  const keyLines = lines.filter((l) => /^[a-z_]+\s*=/.test(l));
  assert.ok(keyLines.length > 30);
  for (const line of keyLines) assert.match(line, /#\s*\S/, `no comment on: ${line}`);
});

Deno.test('[models] base = "auto": on the CPU provider the pinned fp32 export when in place, else the derived fp32 set; fp16 on GPUs', async () => {
  const cases: Array<[string, boolean, string, string]> = [
    ["cpu", true, "sd15-fp32", "fp32"],
    // A fresh machine: the fp32 set `deno task models` derives from the downloaded fp16 one.
    ["cpu", false, "sd15-fp32-derived", "fp32-derived"],
    ["cuda", true, "sd15", "fp16"],
    ["webgpu", false, "sd15", "fp16"],
  ];
  for (const [provider, present, expected, kind] of cases) {
    await withConfig(
      `[models]\nroot = "m"\n[runtime]\nexecution_provider = "${provider}"\n`,
      async (path) => {
        const dir = path.slice(0, path.lastIndexOf("/"));
        if (present) {
          await Deno.mkdir(join(dir, "m/sd15-fp32/unet"), { recursive: true });
          await Deno.writeFile(join(dir, "m/sd15-fp32/unet/weights.pb"), new Uint8Array(1));
        }
        const config = await loadConfig({ path, env: {} });
        assert.equal(config.models.base, join(dir, "m", expected), `${provider}, ${present}`);
        assert.equal(config.models.autoBase, kind);
      },
    );
  }
  // A folder named in the config is used as written, whatever the provider and files.
  await withConfig(`[models]\nroot = "m"\nbase = "sd15-fp32"\n`, async (path) => {
    const config = await loadConfig({ path, env: {} });
    assert.equal(config.models.base, join(path.slice(0, path.lastIndexOf("/")), "m", "sd15-fp32"));
    assert.equal(config.models.autoBase, null);
  });
});

Deno.test("paths resolve against the config file's folder", async () => {
  await withConfig(`[models]\nroot = "m"\n[output]\ndir = "out"\n`, async (path) => {
    const dir = path.slice(0, path.lastIndexOf("/"));
    const config = await loadConfig({ path, env: {} });
    assert.equal(config.models.root, join(dir, "m"));
    // base = "auto" on the default (CPU) provider without the fp32 export: the derived fp32 set.
    assert.equal(config.models.base, join(dir, "m", "sd15-fp32-derived"));
    assert.equal(config.models.lock, join(dir, "models.lock"));
    assert.equal(config.output.dir, join(dir, "out"));
    assert.equal(config.controlnet.depth.model, join(dir, "m", "controlnet/depth.onnx"));
  });
});

Deno.test("an unknown key is refused, naming the file and the key", async () => {
  await withConfig(`[generation]\nstepz = 20\n`, async (path) => {
    const message = await configError(loadConfig({ path, env: {} }));
    assert.match(message, new RegExp(path.replaceAll("/", "\\/")));
    assert.match(message, /generation\.stepz: unknown key/);
  });
  await withConfig(`[sever]\nport = 1\n`, async (path) => {
    assert.match(await configError(loadConfig({ path, env: {} })), /sever: unknown key/);
  });
});

Deno.test("a wrong type is refused with the key and the value", async () => {
  await withConfig(`[server]\nport = "8080"\n`, async (path) => {
    const message = await configError(loadConfig({ path, env: {} }));
    assert.match(message, /server\.port: .*expected number.*\(got "8080"\)/);
  });
});

Deno.test("a value out of range is refused with the key and the value", async () => {
  await withConfig(`[generation]\nsteps = 0\nseed = 4294967296\n`, async (path) => {
    const message = await configError(loadConfig({ path, env: {} }));
    assert.match(message, /generation\.steps: .*>=1.*\(got 0\)/);
    assert.match(message, /generation\.seed: .*\(got 4294967296\)/);
  });
  await withConfig(`[generation]\nscheduler = "heun"\n`, async (path) => {
    assert.match(
      await configError(loadConfig({ path, env: {} })),
      /generation\.scheduler: .*"heun"/,
    );
  });
});

Deno.test("allowed_origins takes http(s) origins only", async () => {
  await withConfig(`[server]\nallowed_origins = ["file:///x"]\n`, async (path) => {
    assert.match(
      await configError(loadConfig({ path, env: {} })),
      /server\.allowed_origins\.0: must be an http\(s\) origin/,
    );
  });
  await withConfig(`[server]\nallowed_origins = ["https://app.example/path"]\n`, async (path) => {
    const config = await loadConfig({ path, env: {} });
    assert.deepEqual(config.server.allowedOrigins, ["https://app.example"]);
  });
});

Deno.test("invalid TOML is refused naming the file", async () => {
  await withConfig(`[server\nport = 1`, async (path) => {
    const message = await configError(loadConfig({ path, env: {} }));
    assert.ok(message.startsWith(path));
    assert.match(message, /invalid TOML/);
  });
});

Deno.test("a missing config file is refused", async () => {
  const message = await configError(loadConfig({ path: "/nonexistent/config.toml", env: {} }));
  assert.match(message, /cannot read config file \/nonexistent\/config\.toml/);
});

Deno.test("command-line overrides are validated like the file", async () => {
  const config = await loadConfig({
    overrides: { transport: "http", host: "0.0.0.0", port: 9000 },
    env: { MCP_ENV: "local" },
  });
  assert.equal(config.server.transport, "http");
  assert.equal(config.server.host, "0.0.0.0");
  assert.equal(config.server.port, 9000);
  assert.match(
    await configError(loadConfig({ overrides: { transport: "sse" }, env: {} })),
    /server\.transport: .*\(got "sse"\)/,
  );
  assert.match(
    await configError(loadConfig({ overrides: { port: 70000 }, env: {} })),
    /server\.port: .*\(got 70000\)/,
  );
});

Deno.test("MCP_ENV overrides server.environment", async () => {
  await withConfig(`[server]\nenvironment = "staging"\n`, async (path) => {
    assert.equal((await loadConfig({ path, env: {} })).server.environment, "staging");
    assert.equal(
      (await loadConfig({ path, env: { MCP_ENV: "local" } })).server.environment,
      "local",
    );
  });
});

Deno.test("HTTP outside local needs CLOUDFRONT_SECRET_HEADER; stdio does not", async () => {
  const message = await configError(loadConfig({ overrides: { transport: "http" }, env: {} }));
  assert.match(message, /CLOUDFRONT_SECRET_HEADER is not set/);
  const ok = await loadConfig({
    overrides: { transport: "http" },
    env: { CLOUDFRONT_SECRET_HEADER: "s3cret" },
  });
  assert.equal(ok.auth.cloudfrontSecret, "s3cret");
  assert.equal((await loadConfig({ env: {} })).server.transport, "stdio");
});

Deno.test("secrets come from the environment; the backend is enabled by BACKEND_INTERNAL_URL", async () => {
  const none = await loadConfig({ env: {} });
  assert.equal(none.backend, undefined);
  assert.equal(none.auth.databaseUrl, undefined);
  const some = await loadConfig({
    env: {
      BACKEND_INTERNAL_URL: "http://backend.internal:3000/",
      BACKEND_INTERNAL_API_KEY: "k",
      DATABASE_URL: "postgres://u:p@h/db",
    },
  });
  assert.deepEqual(some.backend, {
    url: "http://backend.internal:3000",
    apiKey: "k",
    timeoutMs: 15000,
    maxResponseBytes: 8 * 1024 * 1024,
  });
  assert.equal(some.auth.databaseUrl, "postgres://u:p@h/db");
  assert.match(
    await configError(loadConfig({ env: { BACKEND_INTERNAL_URL: "not a url" } })),
    /BACKEND_INTERNAL_URL is not a valid URL/,
  );
});

Deno.test("seed -1 means random, a fixed seed is kept; spacing auto means unset", async () => {
  assert.equal((await loadConfig({ env: {} })).generation.seed, null);
  assert.equal((await loadConfig({ env: {} })).generation.timestepSpacing, undefined);
  await withConfig(`[generation]\nseed = 42\ntimestep_spacing = "trailing"\n`, async (path) => {
    const config = await loadConfig({ path, env: {} });
    assert.equal(config.generation.seed, 42);
    assert.equal(config.generation.timestepSpacing, "trailing");
  });
});

Deno.test("the [server] slow-client limits resolve to milliseconds and counts", async () => {
  await withConfig(
    `[server]\nheader_timeout_seconds = 2.5\nbody_min_bytes_per_second = 1000\n` +
      `idle_timeout_seconds = 30\nmax_connections = 64\nmax_requests_per_key = 4\n`,
    async (path) => {
      const { server } = await loadConfig({ path, env: {} });
      assert.equal(server.headerTimeoutMs, 2500);
      assert.equal(server.bodyMinBytesPerSecond, 1000);
      assert.equal(server.idleTimeoutMs, 30_000);
      assert.equal(server.maxConnections, 64);
      assert.equal(server.maxRequestsPerKey, 4);
    },
  );
  await withConfig(`[server]\nmax_connections = 0\n`, async (path) => {
    assert.match(await configError(loadConfig({ path, env: {} })), /server\.max_connections/);
  });
});

Deno.test("the [server] per-client limits and trusted proxies", async () => {
  const defaults = (await loadConfig({ env: {} })).server;
  assert.equal(defaults.maxConnectionsPerClient, 32);
  assert.equal(defaults.clientConnectionsPerSecond, 50);
  assert.equal(defaults.maxPendingHeads, 128);
  assert.deepEqual(defaults.trustedProxies, [], "no proxy is trusted unless configured");
  assert.equal(defaults.forwardedHeader, "x-forwarded-for");
  await withConfig(
    `[server]\nmax_connections = 64\nmax_connections_per_client = 8\n` +
      `client_connections_per_second = 2.5\nmax_pending_heads = 16\n` +
      `trusted_proxies = ["10.0.0.0/8", "192.0.2.7", "2001:db8::/32"]\nforwarded_header = "forwarded"\n`,
    async (path) => {
      const { server } = await loadConfig({ path, env: {} });
      assert.equal(server.maxConnectionsPerClient, 8);
      assert.equal(server.clientConnectionsPerSecond, 2.5);
      assert.equal(server.maxPendingHeads, 16);
      assert.deepEqual(server.trustedProxies, [
        { address: "10.0.0.0", prefixLength: 8 },
        { address: "192.0.2.7", prefixLength: 32 },
        { address: "2001:db8::", prefixLength: 32 },
      ]);
      assert.equal(server.forwardedHeader, "forwarded");
    },
  );
  await withConfig(`[server]\nmax_connections = 10\n`, async (path) => {
    const { server } = await loadConfig({ path, env: {} });
    assert.equal(server.maxConnectionsPerClient, 10, "a share is at most max_connections");
    assert.equal(server.maxPendingHeads, 10);
  });
  const refused: Array<[string, RegExp]> = [
    [`trusted_proxies = ["10.0.0.0/33"]`, /server\.trusted_proxies\[0\]: prefix length \/33/],
    [
      `trusted_proxies = ["proxy.local"]`,
      /server\.trusted_proxies\[0\]: "proxy\.local" is not an IP/,
    ],
    [`forwarded_header = "x-real-ip"`, /server\.forwarded_header/],
  ];
  for (const [text, message] of refused) {
    await withConfig(`[server]\n${text}\n`, async (path) => {
      assert.match(await configError(loadConfig({ path, env: {} })), message, text);
    });
  }
});

Deno.test("max_wait_seconds 0 means until done; [jobs] defaults and units", async () => {
  const defaults = await loadConfig({ env: {} });
  assert.equal(defaults.generation.maxWaitMs, 50_000);
  assert.deepEqual(defaults.jobs, {
    resultTtlMs: 3_600_000,
    maxResultBytes: 512 * 1024 * 1024,
    leaseMs: 30_000,
    perKey: { jobs: 4, images: 20, resultBytes: 128 * 1024 * 1024 },
    perProject: { jobs: 6, images: 40 },
  });
  await withConfig(
    `[generation]\nmax_wait_seconds = 0\n[jobs]\nresult_ttl_seconds = 60\nmax_result_mib = 1.5\n` +
      `max_jobs_per_key = 0\nmax_images_per_key = 7\nmax_result_mib_per_key = 0.5\n` +
      `max_jobs_per_project = 3\nmax_images_per_project = 0\n`,
    async (path) => {
      const config = await loadConfig({ path, env: {} });
      assert.equal(config.generation.maxWaitMs, Infinity);
      // 0 means no limit.
      assert.deepEqual(config.jobs, {
        resultTtlMs: 60_000,
        maxResultBytes: 1_572_864,
        leaseMs: 30_000,
        perKey: { jobs: Infinity, images: 7, resultBytes: 524_288 },
        perProject: { jobs: 3, images: Infinity },
      });
    },
  );
  await withConfig(`[jobs]\nmax_jobs_per_key = -1\n`, async (path) => {
    assert.match(await configError(loadConfig({ path, env: {} })), /jobs\.max_jobs_per_key/);
  });
  await withConfig(`[jobs]\nresult_ttl_seconds = 0\n`, async (path) => {
    assert.match(await configError(loadConfig({ path, env: {} })), /jobs\.result_ttl_seconds/);
  });
});

Deno.test("server.role front/worker needs HTTP and DATABASE_URL; lease_seconds resolves to ms", async () => {
  await withConfig(`[server]\nrole = "front"\n[jobs]\nlease_seconds = 12\n`, async (path) => {
    const stdio = await configError(loadConfig({ path, env: { DATABASE_URL: "postgres://x/y" } }));
    assert.match(stdio, /server\.role = "front" needs server\.transport = "http", got "stdio"/);
    const noDb = await configError(
      loadConfig({ path, overrides: { transport: "http" }, env: { MCP_ENV: "local" } }),
    );
    assert.match(noDb, /server\.role = "front" needs DATABASE_URL/);
    const ok = await loadConfig({
      path,
      overrides: { transport: "http" },
      env: { MCP_ENV: "local", DATABASE_URL: "postgres://x/y" },
    });
    assert.equal(ok.server.role, "front");
    assert.equal(ok.jobs.leaseMs, 12_000);
  });
  await withConfig(`[server]\nrole = "boss"\n`, async (path) => {
    assert.match(await configError(loadConfig({ path })), /server\.role: .*"boss"/);
  });
  assert.equal((await loadConfig({ env: {} })).server.role, "all");
});

Deno.test("[transform] and [upscale]: the strengths per change level, in order, in (0, 1]", async () => {
  const defaults = await loadConfig({ env: {} });
  assert.deepEqual(defaults.transform, { subtle: 0.3, moderate: 0.5, strong: 0.75 });
  assert.deepEqual(defaults.upscale, { strength: 0.3 });
  await withConfig(
    `[transform]\nsubtle = 0.1\nmoderate = 0.1\nstrong = 1.0\n[upscale]\nstrength = 0.2\n`,
    async (path) => {
      const c = await loadConfig({ path, env: {} });
      assert.deepEqual(c.transform, { subtle: 0.1, moderate: 0.1, strong: 1 });
      assert.equal(c.upscale.strength, 0.2);
    },
  );
  await withConfig(`[transform]\nsubtle = 0.6\n`, async (path) => {
    assert.match(
      await configError(loadConfig({ path, env: {} })),
      /\[transform\] must keep subtle <= moderate <= strong, got subtle = 0.6, moderate = 0.5/,
    );
  });
  await withConfig(`[upscale]\nstrength = 0\n`, async (path) => {
    assert.match(await configError(loadConfig({ path, env: {} })), /upscale\.strength.*above 0/);
  });
  await withConfig(`[transform]\nstrong = 1.5\n`, async (path) => {
    assert.match(await configError(loadConfig({ path, env: {} })), /transform\.strong/);
  });
});

Deno.test("[prompt] syntax and clip_skip: a1111 and 1 by default; others refused with the key", async () => {
  const defaults = await loadConfig({ env: {} });
  assert.equal(defaults.prompt.syntax, "a1111");
  assert.equal(defaults.prompt.clipSkip, 1);
  await withConfig(`[prompt]\nsyntax = "plain"\nclip_skip = 2\n`, async (path) => {
    const config = await loadConfig({ path, env: {} });
    assert.equal(config.prompt.syntax, "plain");
    assert.equal(config.prompt.clipSkip, 2);
  });
  await withConfig(`[prompt]\nsyntax = "comfy"\n`, async (path) => {
    const message = await configError(loadConfig({ path, env: {} }));
    assert.match(message, /prompt\.syntax/);
  });
  await withConfig(`[prompt]\nclip_skip = 0\n`, async (path) => {
    const message = await configError(loadConfig({ path, env: {} }));
    assert.match(message, /prompt\.clip_skip/);
  });
});

Deno.test("[models] vae: a folder under the root that decodes too unless vae_decoder is written", async () => {
  await withConfig(
    `[models]\nroot = "m"\nvae = "converted/vae/mine-fp32"\n[generation]\npreset = "fast"\n`,
    async (path) => {
      const dir = path.slice(0, path.lastIndexOf("/"));
      const config = await loadConfig({ path, env: {} });
      assert.equal(config.models.vae, join(dir, "m", "converted/vae/mine-fp32"));
      // The fast preset's tiny decoder gives way to the VAE the user chose.
      assert.equal(config.models.vaeDecoder, "full");
    },
  );
  await withConfig(
    `[models]\nvae = "v"\nvae_decoder = "tiny"\n[generation]\npreset = "fast"\n`,
    async (path) => {
      assert.equal((await loadConfig({ path, env: {} })).models.vaeDecoder, "tiny");
    },
  );
  await withConfig(`[generation]\npreset = "fast"\n`, async (path) => {
    const config = await loadConfig({ path, env: {} });
    assert.equal(config.models.vae, null);
    assert.equal(config.models.vaeDecoder, "tiny");
  });
});
