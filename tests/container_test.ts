/**
 * The container image (Containerfile) as a deployment builds and runs it:
 * built on a Debian 12 base made from Debian's packages (no image registry
 * is needed), started over HTTP with the test-sized models mounted as a
 * volume and the user's settings mounted as the overlays config.local.toml
 * and models.local.lock, then an MCP client with an API key created inside
 * the running container: `initialize` and `tools/list` over streamable HTTP.
 * Where podman cannot run, the test is ignored and its name says why.
 */

import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { BASE_IMAGE, containerUnavailable, ensureBaseImage, Podman } from "./helpers/container.ts";
import { connectHttp } from "./helpers/http_client.ts";
import { ignoredFor } from "./helpers/ignore.ts";
import { registerPrintedKey } from "./helpers/log_secrets.ts";
import { ROOT } from "./helpers/paths.ts";
import { IMAGE_TOOL_NAMES } from "./helpers/tool_names.ts";

const unavailable = await containerUnavailable();

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

async function healthy(port: number, seconds: number): Promise<boolean> {
  const deadline = performance.now() + seconds * 1000;
  while (performance.now() < deadline) {
    try {
      const response = await fetch(`http://127.0.0.1:${port}/healthz`, {
        signal: AbortSignal.timeout(2000),
      });
      await response.body?.cancel();
      if (response.ok) return true;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  return false;
}

Deno.test({
  ...ignoredFor(
    unavailable,
    "container: the image builds on a Debian base and answers initialize and tools/list over HTTP",
  ),
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const podman = new Podman();
    await podman.init();
    const baseSeconds = await ensureBaseImage(podman);
    const tag = `localhost/generate-image-sd15-mcp:test-${crypto.randomUUID().slice(0, 8)}`;
    const name = `sd15-test-${crypto.randomUUID().slice(0, 8)}`;
    const settings = await Deno.makeTempDir({ prefix: "sd15-container-" });
    try {
      // One step per instruction would copy the whole file system each time with vfs.
      const started = performance.now();
      const built = await podman.run(
        "build",
        "--layers=false",
        "--build-context",
        `deno=${dirname(Deno.execPath())}`,
        "--build-arg",
        `BASE=${BASE_IMAGE}`,
        "--file",
        join(ROOT, "Containerfile"),
        "--tag",
        tag,
        ROOT,
      );
      const buildSeconds = (performance.now() - started) / 1000;
      assert.equal(
        built.code,
        0,
        `podman build failed:\n${built.stdout.slice(-4000)}${built.stderr}`,
      );
      console.error(
        `container: base ${
          baseSeconds === 0 ? "cached" : `built in ${baseSeconds.toFixed(0)} s`
        }, ` +
          `image built in ${buildSeconds.toFixed(0)} s`,
      );

      // The user's settings: the tiny set as the base, its lock entries over the shipped lock.
      await Deno.writeTextFile(
        join(settings, "config.local.toml"),
        '[models]\nbase = "sd15"\n\n[runtime]\nintra_op_threads = 1\ninter_op_threads = 1\n',
      );
      await Deno.copyFile(
        join(ROOT, "tests/fixtures/tiny/models.lock"),
        join(settings, "models.local.lock"),
      );
      const port = freePort();
      const started2 = await podman.run(
        "run",
        "--detach",
        "--name",
        name,
        "--publish",
        `127.0.0.1:${port}:8080`,
        "--env",
        "MCP_ENV=local",
        "--volume",
        `${join(ROOT, "tests/fixtures/tiny/models")}:/app/models:ro`,
        "--volume",
        `${join(settings, "config.local.toml")}:/app/config.local.toml:ro`,
        "--volume",
        `${join(settings, "models.local.lock")}:/app/models.local.lock:ro`,
        tag,
      );
      assert.equal(started2.code, 0, started2.stderr);
      const up = await healthy(port, 180);
      const logs = await podman.run("logs", name);
      assert.ok(up, `/healthz never answered:\n${logs.stdout}${logs.stderr}`);

      // A key from the running container's own database, as an operator makes one.
      const created = await podman.run(
        "exec",
        name,
        ..."deno task --quiet keys create --project 1 --user 1 --permission write".split(" "),
      );
      assert.equal(created.code, 0, created.stderr);
      const key = registerPrintedKey(created.stdout);
      assert.match(key, /^guinness_/);

      const client = await connectHttp(port, { "MCP-API-Key": key });
      try {
        assert.equal(client.getServerVersion()?.name, "generate-image-sd15-mcp");
        const { tools } = await client.listTools();
        assert.deepEqual(tools.map((t) => t.name), IMAGE_TOOL_NAMES);
      } finally {
        await client.close();
      }

      // A clean start: no registry lookups, no Deno warnings, no telemetry from ONNX Runtime.
      const logged = await podman.run("logs", name);
      const output = logged.stdout + logged.stderr;
      assert.match(output, /listening on http:\/\/0\.0\.0\.0:8080\/mcp/);
      assert.doesNotMatch(output, /Download|Warning|telemetry/i);

      // SIGTERM (podman stop) ends it cleanly.
      const stopped = await podman.run("stop", "--time", "30", name);
      assert.equal(stopped.code, 0, stopped.stderr);
      const exit = await podman.run("inspect", "--format", "{{.State.ExitCode}}", name);
      assert.equal(exit.stdout.trim(), "0", (await podman.run("logs", name)).stderr);
    } finally {
      await podman.run("rm", "--force", name);
      await podman.run("rmi", "--force", tag);
      await Deno.remove(settings, { recursive: true }).catch(() => {});
    }
  },
});
