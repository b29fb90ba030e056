/**
 * `deno task models add --component lora` on the shipped config, whose
 * `preset = "auto"` is the fast preset on the CPU: the preset merges the LCM
 * LoRA by itself, after `[lora] files`. The command writes (or prints) what
 * the user wrote plus the new LoRA, never the resolved list with the LCM
 * LoRA in it, so each LoRA is merged once; a config that names the preset's
 * LoRA again (what the command used to write) is refused at start-up, naming
 * it.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { loadConfig } from "../mod/config/mod.ts";
import { buildTinyLora } from "./fixtures/builder/mod.ts";
import { MERGED_DIR, readDerivedRecord } from "../mod/models/mod.ts";
import { layOutFastModels, LCM_LORA } from "./helpers/fast_models.ts";
import { modelsTask } from "./helpers/models_cli.ts";
import { ROOT } from "./helpers/paths.ts";

const STYLE = "lora/style.safetensors";

/** `deno task serve --check --config <config>` (checks the models and loads them; no transport). */
async function serveCheck(config: string) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-P=serve", "--quiet", "main.ts", "--check", "--config", config],
    cwd: ROOT,
    stdin: "null",
    env: { NO_COLOR: "1" },
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** The resolved `[lora] files` as root-relative paths and weights. */
async function resolvedLoras(config: string): Promise<Array<[string, number]>> {
  const c = await loadConfig({ path: config, overrides: { transport: "stdio" } });
  return c.lora.files.map((f) => [f.path.slice(c.models.root.length + 1), f.weight]);
}

Deno.test("models add --component lora on the shipped config: the LCM LoRA once (from the preset), the new LoRA once", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sd15-add-lora-" });
  try {
    // The shipped config and lock as a user has them, with the fast preset's models in place
    // (locked in models.local.lock) and the base named, as `models add` of a set would.
    const config = join(dir, "config.toml");
    await Deno.copyFile(join(ROOT, "config.toml"), config);
    await Deno.copyFile(join(ROOT, "models.lock"), join(dir, "models.lock"));
    await Deno.writeTextFile(
      join(dir, "models.local.lock"),
      await layOutFastModels(join(dir, "models")),
    );
    const local = join(dir, "config.local.toml");
    await Deno.writeTextFile(
      local,
      `[models]\nbase = "sd15"\n\n[runtime]\nintra_op_threads = 1\ninter_op_threads = 1\n`,
    );
    await Deno.writeFile(join(dir, "models", STYLE), buildTinyLora(7, { rank: 2, alpha: 2 }));
    assert.deepEqual(await resolvedLoras(config), [[LCM_LORA, 1]], "the preset's LoRA alone");

    // Without --write-config: the line to paste names the new LoRA alone.
    const printed = await modelsTask(dir, ["add", "--component", "lora", `models/${STYLE}`]);
    assert.equal(printed.code, 0, printed.stderr);
    assert.match(printed.stdout, /^# append these lines to .*config\.local\.toml/m);
    assert.match(
      printed.stdout,
      /^files = \[\{ path = "lora\/style\.safetensors", weight = 1\.0 \}\]$/m,
    );
    assert.doesNotMatch(printed.stdout, /lcm/);

    const written = await modelsTask(dir, [
      "add",
      "--component",
      "lora",
      `models/${STYLE}`,
      "--write-config",
    ]);
    assert.equal(written.code, 0, written.stderr);
    const text = await Deno.readTextFile(local);
    assert.match(text, /^files = \[\{ path = "lora\/style\.safetensors", weight = 1\.0 \}\]$/m);
    assert.doesNotMatch(text, /lcm/);
    // Resolved: the user's LoRA, then the preset's; each once.
    assert.deepEqual(await resolvedLoras(config), [[STYLE, 1], [LCM_LORA, 1]]);

    // Adding it again changes nothing; adding the preset's own LoRA is not written either.
    const again = await modelsTask(dir, [
      "add",
      "--component",
      "lora",
      `models/${STYLE}`,
      "--write-config",
    ]);
    assert.equal(again.code, 0, again.stderr);
    const lcm = await modelsTask(dir, [
      "add",
      "--component",
      "lora",
      `models/${LCM_LORA}`,
      "--write-config",
    ]);
    assert.equal(lcm.code, 0, lcm.stderr);
    assert.match(
      lcm.stderr,
      /is the LoRA the fast preset merges by itself: it needs no \[lora\] files entry/,
    );
    assert.equal(await Deno.readTextFile(local), text);

    // `deno task models` merges the two LoRAs, each once, at weight 1.
    const built = await modelsTask(dir, []);
    assert.equal(built.code, 0, built.stderr);
    const unet = [...Deno.readDirSync(join(dir, "models", MERGED_DIR))]
      .find((e) => e.name.startsWith("unet-") && !e.name.includes(".building-"));
    assert.ok(unet, "a merged UNet");
    const record = await readDerivedRecord(join(dir, "models", MERGED_DIR, unet.name));
    const loraInputs = record!.recipe.inputs.filter((i) => i.path.startsWith("lora/"));
    assert.deepEqual(loraInputs.map((i) => i.path), [STYLE, LCM_LORA]);
    assert.deepEqual(record!.recipe.params?.weights, [1, 1]);
    const check = await serveCheck(config);
    assert.equal(check.code, 0, check.stderr);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a config listing a LoRA twice fails start-up naming it: the preset's own LoRA written again, or one file under two paths", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sd15-lora-twice-" });
  try {
    const config = join(dir, "config.toml");
    await Deno.copyFile(join(ROOT, "config.toml"), config);
    await Deno.copyFile(join(ROOT, "models.lock"), join(dir, "models.lock"));
    const lock = await layOutFastModels(join(dir, "models"));
    await Deno.writeFile(join(dir, "models", STYLE), buildTinyLora(7, { rank: 2, alpha: 2 }));
    await Deno.writeTextFile(join(dir, "models.local.lock"), lock);
    const locked = await modelsTask(dir, ["add", "--component", "lora", `models/${STYLE}`]);
    assert.equal(locked.code, 0, locked.stderr);
    const local = join(dir, "config.local.toml");
    const settings = `[models]\nbase = "sd15"\n\n[runtime]\nintra_op_threads = 1\n`;
    // What `models add --write-config` wrote before it read the user's own list.
    await Deno.writeTextFile(
      local,
      `${settings}\n[lora]\nfiles = [{ path = "${LCM_LORA}", weight = 1.0 }, ` +
        `{ path = "${STYLE}", weight = 1.0 }]\n`,
    );
    const stale = await serveCheck(config);
    assert.equal(stale.code, 1, stale.stderr);
    assert.match(stale.stderr, /check failed: a LoRA is listed more than once/);
    assert.match(
      stale.stderr,
      /lora\/lcm-lora-sdv1-5\/pytorch_lora_weights\.safetensors \(entry 1 of 3, weight 1\) and lora\/lcm-lora-sdv1-5\/pytorch_lora_weights\.safetensors \(entry 3 of 3, weight 1\): the same path, the same file, the same content/,
    );
    assert.match(stale.stderr, /remove the repeat from \[lora\] files/);
    assert.equal(stale.stdout, "", "nothing printed as ok");
    assert.ok(!(await exists(join(dir, "models", MERGED_DIR))), "nothing was merged");
    // `models check` reports it, and `models add` warns about the stale entry.
    const checked = await modelsTask(dir, ["check"]);
    assert.equal(checked.code, 1, checked.stdout);
    assert.match(checked.stdout, /^repeated +a LoRA is listed more than once/m);
    const warned = await modelsTask(dir, ["add", "--component", "lora", `models/${STYLE}`]);
    assert.equal(warned.code, 0, warned.stderr);
    assert.match(
      warned.stderr,
      /\[lora\] files lists lora\/lcm-lora-sdv1-5\/pytorch_lora_weights\.safetensors, which the fast preset merges by itself/,
    );
    // The same LoRA under another name (a link), with the quality preset: still refused.
    await Deno.symlink(join(dir, "models", STYLE), join(dir, "models/lora/alias.safetensors"));
    const alias = await modelsTask(dir, [
      "add",
      "--component",
      "lora",
      "models/lora/alias.safetensors",
    ]);
    assert.equal(alias.code, 0, alias.stderr);
    await Deno.writeTextFile(
      local,
      `${settings}\n[generation]\npreset = "quality"\n\n[lora]\nfiles = [{ path = "${STYLE}", ` +
        `weight = 0.5 }, { path = "lora/alias.safetensors", weight = 0.5 }]\n`,
    );
    const linked = await serveCheck(config);
    assert.equal(linked.code, 1, linked.stderr);
    assert.match(
      linked.stderr,
      /lora\/style\.safetensors \(entry 1 of 2, weight 0\.5\) and lora\/alias\.safetensors \(entry 2 of 2, weight 0\.5\): the same file, the same content/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}
