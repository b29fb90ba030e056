import assert from "node:assert/strict";
import { join } from "node:path";
import { engineConfigOf } from "../pipeline/engine_config.ts";
import { loadConfig } from "./mod.ts";

async function load(text: string) {
  const dir = await Deno.makeTempDir();
  const path = join(dir, "config.toml");
  await Deno.writeTextFile(path, text);
  try {
    return { dir, config: await loadConfig({ path, env: {} }) };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("[runtime] optimized_cache: on by default, under the models root; false turns it off", async () => {
  const { dir, config } = await load('[models]\nroot = "m"\n');
  assert.equal(config.runtime.optimizedCache, join(dir, "m", ".optimized"));
  assert.equal(engineConfigOf(config).runtime.optimizedCache, join(dir, "m", ".optimized"));
  const off = await load("[runtime]\noptimized_cache = false\n");
  assert.equal(off.config.runtime.optimizedCache, null);
});

Deno.test('[runtime] warm_up = "auto": on for few-step sampling, at the default size; off for 25 steps', async () => {
  const fast = (await load("")).config; // preset auto on the CPU: fast, 4 steps
  assert.equal(fast.runtime.warmUp, true);
  assert.deepEqual(engineConfigOf(fast).warmUp, { width: 512, height: 512 });
  const portrait = (await load('[generation]\ndefault_size = "portrait_512"\n')).config;
  assert.deepEqual(engineConfigOf(portrait).warmUp, { width: 384, height: 512 });
  const quality = (await load('[generation]\npreset = "quality"\n')).config;
  assert.equal(quality.runtime.warmUp, false);
  assert.equal(engineConfigOf(quality).warmUp, undefined);
  const forced =
    (await load('[generation]\npreset = "quality"\n\n[runtime]\nwarm_up = true\n')).config;
  assert.equal(forced.runtime.warmUp, true);
  const off = (await load("[runtime]\nwarm_up = false\n")).config;
  assert.equal(off.runtime.warmUp, false);
  await assert.rejects(load('[runtime]\nwarm_up = "always"\n'), /warm_up/);
});

Deno.test('[runtime] cpu_mem_arena / memory_pattern = "auto": the sessions every image runs keep their memory under fast and turbo, no others', async () => {
  const given = { cpuMemArena: false, memoryPattern: true };
  const kept = { cpuMemArena: true, memoryPattern: false };
  const memory = (c: Awaited<ReturnType<typeof load>>["config"]) => ({
    others: { cpuMemArena: c.runtime.cpuMemArena, memoryPattern: c.runtime.memoryPattern },
    everyImage: c.runtime.imageSessions,
  });
  for (const preset of ["fast", "turbo"]) {
    const c = (await load(`[generation]\npreset = "${preset}"\n`)).config;
    assert.deepEqual(memory(c), { others: given, everyImage: kept }, preset);
    assert.deepEqual(engineConfigOf(c).runtime.imageSessions, kept);
  }
  for (const preset of ["quality", "custom"]) {
    const c = (await load(`[generation]\npreset = "${preset}"\n`)).config;
    assert.deepEqual(memory(c), { others: given, everyImage: given }, preset);
  }
  // A value written in the config applies to every session; the pattern follows the arena.
  const on = (await load('[generation]\npreset = "quality"\n\n[runtime]\ncpu_mem_arena = true\n'))
    .config;
  assert.deepEqual(memory(on), { others: kept, everyImage: kept });
  const off = (await load('[generation]\npreset = "turbo"\n\n[runtime]\ncpu_mem_arena = false\n'))
    .config;
  assert.deepEqual(memory(off), { others: given, everyImage: given });
  const both = (await load('[generation]\npreset = "turbo"\n\n[runtime]\nmemory_pattern = true\n'))
    .config;
  assert.deepEqual(memory(both), {
    others: given,
    everyImage: { cpuMemArena: true, memoryPattern: true },
  });
  await assert.rejects(load('[runtime]\ncpu_mem_arena = "on"\n'), /cpu_mem_arena/);
});
