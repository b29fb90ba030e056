/**
 * SIGTERM while the server starts, the way a client that gives up on a slow
 * start (or an orchestrator) sends it: the real server on a models root whose
 * first start derives the fp32 set from an fp16 one (the real converter,
 * `base = "auto"` on the CPU provider, the shipped lock's `[[derived]]`
 * tables), with a UNet made large enough that its conversion takes seconds.
 *
 * - SIGTERM during the conversion (stdio): the process exits 0 within
 *   `shutdown_grace_seconds` (the bound the server enforces while starting),
 *   the model load never completes, and the models root holds no
 *   half-written folder: each derived folder is either complete (`models
 *   check`: ok) or absent (not built), and no scratch folder is left. A later
 *   start builds what was abandoned and loads.
 * - SIGTERM while ONNX Runtime opens the models in the inference Worker
 *   (HTTP, PostgreSQL): the same exit, without waiting for the sessions.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import onnx from "onnx-proto";
import { lockText, parseLock as parseBuilderLock } from "./fixtures/builder/mod.ts";
import { sha256File } from "../mod/bytes/mod.ts";
import { derivedToml, parseLock } from "../mod/models/mod.ts";
import { followStderr } from "./helpers/child_stderr.ts";
import { copyDir } from "./helpers/copy_dir.ts";
import { teeChildLog } from "./helpers/log_secrets.ts";
import { modelsTask } from "./helpers/models_cli.ts";
import { ROOT } from "./helpers/paths.ts";
import { openTestDatabase } from "./helpers/postgres.ts";

const P = onnx.onnx;
const GRACE_SECONDS = 10;
/** Unused float16 initializers added to the UNet: 12 × 4 M values (96 MB, 192 MB widened). */
const PADDING_TENSORS = 12;
const PADDING_VALUES = 4 * 1024 * 1024;

/**
 * Lays out `<dir>/models/sd15` (the tiny fp16 set, its UNet padded with
 * unused float16 initializers stored in its `weights.pb`) and `<dir>/models.lock`
 * pinning it, with the shipped lock's `[[derived]]` tables for `sd15-fp32-derived/`.
 */
async function layOutSlowDerivedSet(dir: string): Promise<void> {
  const fixtures = join(ROOT, "tests/fixtures/tiny");
  const set = join(dir, "models/sd15");
  await copyDir(join(fixtures, "models/sd15-fp16"), set);
  const modelPath = join(set, "unet/model.onnx");
  const weightsPath = join(set, "unet/weights.pb");
  const model = P.ModelProto.decode(await Deno.readFile(modelPath));
  let offset = (await Deno.stat(weightsPath)).size;
  for (let i = 0; i < PADDING_TENSORS; i++) {
    model.graph!.initializer!.push({
      name: `startup_signal_padding_${i}`,
      dataType: P.TensorProto.DataType.FLOAT16,
      dims: [PADDING_VALUES],
      dataLocation: P.TensorProto.DataLocation.EXTERNAL,
      externalData: [
        { key: "location", value: "weights.pb" },
        { key: "offset", value: String(offset) },
        { key: "length", value: String(PADDING_VALUES * 2) },
      ],
    });
    offset += PADDING_VALUES * 2;
  }
  await Deno.writeFile(modelPath, P.ModelProto.encode(model).finish());
  // Zeros, written as a hole: the conversion reads and widens them like any weights.
  await Deno.truncate(weightsPath, offset);
  const files = await Promise.all(
    parseBuilderLock(await Deno.readTextFile(join(fixtures, "models.lock")))
      .filter((e) => e.path.startsWith("sd15-fp16/"))
      .map(async (e) => {
        const path = e.path.replace(/^sd15-fp16\//, "sd15/");
        const abs = join(dir, "models", path);
        return { ...e, path, size: (await Deno.stat(abs)).size, sha256: await sha256File(abs) };
      }),
  );
  const shipped = parseLock(await Deno.readTextFile(join(ROOT, "models.lock")));
  const derived = shipped.derived.filter((d) => d.path.startsWith("sd15-fp32-derived/"));
  assert.ok(derived.some((d) => d.path === "sd15-fp32-derived/unet"));
  await Deno.writeTextFile(
    join(dir, "models.lock"),
    `${lockText(files)}\n${derived.map(derivedToml).join("\n")}`,
  );
}

/** A config for that models root (`base = "auto"`: the derived fp32 set on the CPU provider). */
async function writeConfig(dir: string): Promise<string> {
  const config = join(dir, "config.toml");
  await Deno.writeTextFile(
    config,
    `[server]\nenvironment = "local"\nport = 0\nshutdown_grace_seconds = ${GRACE_SECONDS}\n` +
      `data_dir = ${JSON.stringify(join(dir, "data"))}\n` +
      `[models]\nroot = "models"\n` +
      `[runtime]\nintra_op_threads = 1\ninter_op_threads = 1\n` +
      `[generation]\npreset = "quality"\nsteps = 2\n`,
  );
  return config;
}

/** Every path under `dir` whose name marks an unfinished build (a scratch folder). */
async function scratchFolders(dir: string): Promise<string[]> {
  const found: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    const path = join(dir, e.name);
    if (e.name.includes(".building-") || e.name.includes(".tmp")) found.push(path);
    else if (e.isDirectory) found.push(...await scratchFolders(path));
  }
  return found;
}

/** Sends SIGTERM once `pattern` is logged; returns the exit status, or null when it did not come within the grace. */
async function terminateAt(
  child: Deno.ChildProcess,
  pattern: RegExp,
  what: string,
): Promise<{ code: number | null; stderr: string }> {
  const stderr = followStderr(child.stderr);
  await stderr.waitFor(pattern, what);
  child.kill("SIGTERM");
  const drained = stderr.drain();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const exited = await Promise.race([
    child.status.then((s) => s.code),
    new Promise<null>((r) => timer = setTimeout(() => r(null), GRACE_SECONDS * 1000)),
  ]);
  clearTimeout(timer);
  if (exited === null) {
    child.kill("SIGKILL");
    await child.status;
  }
  await drained;
  teeChildLog(`server (SIGTERM at ${what})`, stderr.text());
  return { code: exited, stderr: stderr.text() };
}

function serve(config: string, transport: "stdio" | "http", env: Record<string, string> = {}) {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", "-P=serve", "--quiet", "main.ts", "--config", config, "--transport", transport],
    cwd: ROOT,
    // stdio: a client that keeps its end open and sends nothing while the models load.
    stdin: "piped",
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1", ...env },
  }).spawn();
}

Deno.test("SIGTERM during start-up: exits within the shutdown grace during a conversion and while the models open, leaving no half-written cache", async (t) => {
  const dir = await Deno.makeTempDir({ prefix: "sd15-startup-signal-" });
  // Searchable by the `postgres` user that runs the embedded database when tests run as root.
  await Deno.chmod(dir, 0o711);
  try {
    await layOutSlowDerivedSet(dir);
    const config = await writeConfig(dir);
    const models = join(dir, "models");

    await t.step("during the fp32 conversion of the UNet (stdio)", async () => {
      const child = serve(config, "stdio");
      const { code, stderr } = await terminateAt(
        child,
        /building a derived model folder \{"path":"sd15-fp32-derived\/unet"/,
        "the UNet's conversion",
      );
      assert.notEqual(code, null, `still running ${GRACE_SECONDS} s after SIGTERM:\n${stderr}`);
      assert.equal(code, 0, stderr);
      assert.match(stderr, /SIGTERM while starting: abandoning the model load and shutting down/);
      assert.match(stderr, /stopped before the models loaded/);
      assert.doesNotMatch(stderr, /models loaded; tools available/);
      // Abandoned during the conversion, not after it.
      assert.doesNotMatch(
        stderr,
        /built derived model files \{"folder":"[^"]*sd15-fp32-derived\/unet"/,
      );
      assert.doesNotMatch(
        stderr,
        /still starting .* exiting now/,
        "the grace's hard stop was not needed",
      );
      assert.deepEqual(await scratchFolders(models), []);
      // Every derived folder is complete or absent: none is stale, short or of another hash.
      const check = await modelsTask(dir, ["check", "--config", config]);
      const derived = check.stdout.split("\n").filter((l) => l.includes("sd15-fp32-derived/"));
      assert.ok(
        derived.some((l) => /^not built +sd15-fp32-derived\/unet\/model\.onnx/.test(l)),
        check.stdout,
      );
      for (const line of derived) assert.match(line, /^(ok|not built) /, check.stdout);
    });

    await t.step("the next start builds what was abandoned and loads", async () => {
      const out = await new Deno.Command(Deno.execPath(), {
        args: ["run", "-P=serve", "--quiet", "main.ts", "--check", "--config", config],
        cwd: ROOT,
        stdin: "null",
        env: { NO_COLOR: "1" },
      }).output();
      const stderr = new TextDecoder().decode(out.stderr);
      assert.equal(out.code, 0, stderr);
      assert.match(stderr, /built derived model files \{"folder":"[^"]*sd15-fp32-derived\/unet"/);
      const check = await modelsTask(dir, ["check", "--config", config]);
      assert.equal(check.code, 0, check.stdout);
    });

    await t.step("while ONNX Runtime opens the models (HTTP)", async () => {
      const tdb = await openTestDatabase("startup_signal");
      try {
        const child = serve(config, "http", { DATABASE_URL: tdb.url });
        const { code, stderr } = await terminateAt(
          child,
          /opening them in the inference worker/,
          "opening the models",
        );
        assert.notEqual(code, null, `still running ${GRACE_SECONDS} s after SIGTERM:\n${stderr}`);
        assert.equal(code, 0, stderr);
        assert.match(stderr, /SIGTERM while starting/);
        assert.doesNotMatch(stderr, /models loaded; tools available/);
        // Stopped while the database opened: it never starts listening.
        const listening = stderr.indexOf("listening on");
        assert.ok(listening < 0 || listening < stderr.indexOf("SIGTERM while starting"), stderr);
        assert.doesNotMatch(stderr, /still starting .* exiting now/);
      } finally {
        await tdb.close();
      }
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
