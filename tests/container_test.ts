/**
 * The container image (Containerfile) as a deployment builds and runs it:
 * built on a Debian 12 base made from Debian's packages (no image registry
 * is needed); the user's settings mounted as the overlays config.local.toml
 * and models.local.lock over the shipped defaults (the fast preset on the
 * CPU provider); `deno task models` run in the image to prepare the
 * test-sized models volume (the TAESD decoder derived, the LCM LoRA merged);
 * then the server started over HTTP on that volume mounted read-only, and
 * an MCP client with an API key created inside the running container:
 * `initialize`, `tools/list` and an image over streamable HTTP, and
 * `deno task models check` in the container.
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
import { layOutFastModels } from "./helpers/fast_models.ts";
import { readPngText } from "../mod/image/mod.ts";
import { pngs, texts } from "./helpers/results.ts";

const unavailable = await containerUnavailable();

/** Makes every folder under `dir` writable by any user (the container's), files readable. */
async function openFolders(dir: string): Promise<void> {
  await Deno.chmod(dir, 0o777);
  for await (const e of Deno.readDir(dir)) {
    if (e.isDirectory) await openFolders(join(dir, e.name));
    else await Deno.chmod(join(dir, e.name), 0o644);
  }
}

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
    "container: the image builds on a Debian base, prepares the fast preset's models with deno task models and serves an image over HTTP",
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

      // The user's settings: the tiny set as the base, on the shipped config's default (the
      // fast preset on the CPU provider), with an LCM-LoRA stand-in and TAESD weights locked
      // over the shipped pins of the same paths; the shipped [[derived]] TAESD table applies.
      const models = join(settings, "models");
      await Deno.writeTextFile(
        join(settings, "models.local.lock"),
        await layOutFastModels(models),
      );
      await Deno.writeTextFile(
        join(settings, "config.local.toml"),
        '[models]\nbase = "sd15"\n\n[runtime]\nintra_op_threads = 1\ninter_op_threads = 1\n',
      );
      // The container's user (uid 10001) writes the derived files and the merge cache.
      await openFolders(models);
      const overlays = [
        "--volume",
        `${join(settings, "config.local.toml")}:/app/config.local.toml:ro`,
        "--volume",
        `${join(settings, "models.local.lock")}:/app/models.local.lock:ro`,
      ];

      // `deno task models` in the image, as a user prepares the models volume: everything is
      // in place and verified, so it derives the TAESD decoder and merges the LCM LoRA.
      const prepared = await podman.run(
        "run",
        "--rm",
        "--volume",
        `${models}:/app/models`,
        ...overlays,
        "--entrypoint",
        "deno",
        tag,
        ..."task --quiet models".split(" "),
      );
      assert.equal(prepared.code, 0, prepared.stdout + prepared.stderr);
      assert.match(prepared.stderr, /derived model files built/);
      assert.match(prepared.stderr, /LoRA-merged models in place/);
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
        // Prepared: the server finds everything built and needs to write nothing there.
        `${models}:/app/models:ro`,
        ...overlays,
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
        // An image on the fast preset, the derived TAESD decoder and the cached merge.
        const made = await client.callTool(
          {
            name: "generate_image",
            arguments: { positive_prompt: "a lighthouse", size: "square_512" },
          },
          undefined,
          { timeout: 300_000 },
        );
        assert.equal(made.isError, undefined, texts(made));
        const meta = readPngText(pngs(made)[0]);
        assert.deepEqual([meta.preset, meta.scheduler, meta.vae_decoder], ["fast", "lcm", "tiny"]);
      } finally {
        await client.close();
      }

      // `deno task models check` in the running container: every needed file ok, the derived
      // decoder and the merged models among them.
      const checked = await podman.run(
        "exec",
        name,
        ..."deno task --quiet models check".split(" "),
      );
      assert.equal(checked.code, 0, checked.stdout + checked.stderr);
      assert.match(checked.stdout, /^ok +taesd\/vae_decoder\/model\.onnx +\(made here by taesd/m);
      assert.match(checked.stdout, /^ok +\.merged\/unet-[0-9a-f]+\/ /m);
      assert.match(checked.stdout, /: all ok/);

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
