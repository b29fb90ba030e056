/**
 * A user's settings survive updates: in a clone, `deno task models add
 * --write-config` writes only files git does not track (config.local.toml,
 * models.local.lock), so a later `git pull` of new commits to config.toml
 * and models.lock merges without conflict and the user's choice still
 * applies. Without --write-config the printed lines stay valid TOML where
 * the command says to put them.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { loadConfig } from "../mod/config/mod.ts";
import { readModelsLock } from "../mod/models/mod.ts";
import { copyDir } from "./helpers/copy_dir.ts";
import { modelsTask } from "./helpers/models_cli.ts";
import { ROOT } from "./helpers/paths.ts";

const GIT_ENV = {
  GIT_AUTHOR_NAME: "test",
  GIT_AUTHOR_EMAIL: "test@example.invalid",
  GIT_COMMITTER_NAME: "test",
  GIT_COMMITTER_EMAIL: "test@example.invalid",
  GIT_CONFIG_NOSYSTEM: "1",
  HOME: "/nonexistent",
};

async function run(cwd: string, command: string, ...args: string[]) {
  const out = await new Deno.Command(command, {
    args,
    cwd,
    stdin: "null",
    env: { NO_COLOR: "1", ...GIT_ENV },
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

async function git(cwd: string, ...args: string[]): Promise<string> {
  const out = await run(cwd, "git", "-c", "init.defaultBranch=main", ...args);
  assert.equal(out.code, 0, `git ${args.join(" ")}: ${out.stderr}`);
  return out.stdout;
}

/** `deno task models …` in `cwd`. */
function models(cwd: string, ...args: string[]) {
  return modelsTask(cwd, args);
}

Deno.test("models add --write-config in a clone, then git pull of upstream changes: no conflict, the choice applies", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sd15-user-settings-" });
  try {
    // Upstream: the shipped config.toml, models.lock and .gitignore.
    const upstream = join(dir, "upstream");
    await Deno.mkdir(upstream);
    for (const file of ["config.toml", "models.lock", ".gitignore"]) {
      await Deno.copyFile(join(ROOT, file), join(upstream, file));
    }
    await git(upstream, "init", "-q");
    await git(upstream, "add", ".");
    await git(upstream, "commit", "-qm", "shipped");

    const clone = join(dir, "clone");
    await git(dir, "clone", "-q", upstream, clone);
    await copyDir(join(ROOT, "tests/fixtures/tiny/models/sd15-optimum"), join(clone, "models/own"));
    const added = await models(clone, "add", "models/own", "--write-config");
    assert.equal(added.code, 0, added.stderr);
    // The user picks the quality preset too (the CPU default, fast, would need the LCM LoRA
    // and TAESD downloaded), in the same overlay.
    await Deno.writeTextFile(
      join(clone, "config.local.toml"),
      '\n[generation]\npreset = "quality"\n',
      {
        append: true,
      },
    );
    // Nothing git tracks changed, and nothing new is offered for committing.
    assert.equal(await git(clone, "status", "--porcelain"), "");

    // Upstream moves on: a new default base and a new pinned file, in the lines the user chose.
    const config = await Deno.readTextFile(join(upstream, "config.toml"));
    await Deno.writeTextFile(
      join(upstream, "config.toml"),
      config.replace(/^base = "auto" /m, 'base = "sd15" '),
    );
    const extra = `\n[[file]]\ncomponent = "lora"\npath = "lora/new.safetensors"\n` +
      `url = "https://example.com/new.safetensors"\nsize = 1\nsha256 = "${"c".repeat(64)}"\n`;
    await Deno.writeTextFile(join(upstream, "models.lock"), extra, { append: true });
    await git(upstream, "commit", "-qam", "upstream update");

    const pulled = await run(clone, "git", "pull", "-q", "--no-rebase");
    assert.equal(pulled.code, 0, pulled.stdout + pulled.stderr);
    assert.match(await Deno.readTextFile(join(clone, "config.toml")), /^base = "sd15" /m);
    assert.equal(await git(clone, "status", "--porcelain"), "");

    // The user's base still applies, over upstream's new default; both locks are read.
    const resolved = await loadConfig({ path: join(clone, "config.toml"), env: {} });
    assert.equal(resolved.models.base, join(clone, "models/own"));
    assert.equal(resolved.generation.preset, "quality");
    const paths = (await readModelsLock(resolved.models.lock)).map((e) => e.path);
    assert.ok(paths.includes("own/unet/model.onnx"), "the added set is locked");
    assert.ok(paths.includes("lora/new.safetensors"), "upstream's new entry is read");
    const check = await models(clone, "check");
    assert.equal(check.code, 0, check.stdout + check.stderr);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("models add without --write-config prints lines that stay valid where it says to put them", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sd15-snippet-" });
  try {
    await Deno.copyFile(join(ROOT, "config.toml"), join(dir, "config.toml"));
    await Deno.copyFile(join(ROOT, "models.lock"), join(dir, "models.lock"));
    await copyDir(join(ROOT, "tests/fixtures/tiny/models/sd15"), join(dir, "models/own"));
    const overlay = join(dir, "config.local.toml");

    // No overlay yet: whole tables to append to config.local.toml.
    const first = await models(dir, "add", "models/own");
    assert.equal(first.code, 0, first.stderr);
    const lines = first.stdout.trimEnd().split("\n");
    assert.match(lines[0], /^# append these lines to config\.local\.toml /);
    assert.deepEqual(lines.slice(1), [
      "[models]",
      'base = "own"',
      'controlnet_unet = "own/controlnet_unet/model.onnx"',
    ]);
    await Deno.writeTextFile(overlay, first.stdout, { append: true });
    const resolved = await loadConfig({ path: join(dir, "config.toml"), env: {} });
    assert.equal(resolved.models.base, join(dir, "models/own"));
    assert.equal(
      resolved.models.controlnetUnet,
      join(dir, "models/own/controlnet_unet/model.onnx"),
    );

    // The overlay has [models] now: appending a second [models] would break it, so the
    // lines are comments (harmless wherever pasted) naming each key.
    const again = await models(
      dir,
      "add",
      "--component",
      "tiny_vae_decoder",
      "models/own/vae_decoder/model.onnx",
    );
    assert.equal(again.code, 0, again.stderr);
    assert.match(
      again.stdout,
      /^# config\.local\.toml already has these tables: rerun with --write-config/,
    );
    assert.match(again.stdout, /^# {3}\[models\] vae_decoder = "tiny"$/m);
    await Deno.writeTextFile(overlay, again.stdout, { append: true });
    await loadConfig({ path: join(dir, "config.toml"), env: {} });
    // The shipped config.toml itself was never edited.
    assert.equal(
      await Deno.readTextFile(join(dir, "config.toml")),
      await Deno.readTextFile(join(ROOT, "config.toml")),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
