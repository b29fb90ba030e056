/**
 * Writes a config for the tiny model set into a temporary folder, with extra
 * TOML appended (absolute paths, so it can live anywhere).
 *
 * @module
 */

import { join } from "node:path";
import { ROOT } from "./paths.ts";

/** A temporary config file and its folder. */
export interface TempConfig {
  path: string;
  dir: string;
  remove(): Promise<void>;
}

/**
 * `sections` with `preset = "quality"` in its `[generation]` (added when it has
 * none) unless it names a preset: the tests' sampling keys (`steps = 500`, …)
 * then mean what they meant before presets were picked per provider, and
 * only tests of the fast default run the CPU provider's fast preset.
 */
function withQualityPreset(sections: string): string {
  if (/^\s*preset\s*=/m.test(sections)) return sections;
  return /^\[generation\]\s*$/m.test(sections)
    ? sections.replace(/^\[generation\]\s*$/m, '[generation]\npreset = "quality"')
    : `${sections}\n[generation]\npreset = "quality"\n`;
}

/**
 * Writes `config.toml` with the tiny models and `sections` (TOML text with
 * whole sections; `[server]`, `[models]`, `[runtime]` are written here and
 * must not be repeated). `[generation] preset` is "quality" unless `sections`
 * sets one.
 */
export async function writeTinyConfig(
  sections = "",
  server: Record<string, string | number> = {},
): Promise<TempConfig> {
  const dir = await Deno.makeTempDir({ prefix: "sd15-config-" });
  // Searchable by the `postgres` user that runs the embedded database when tests run as root.
  await Deno.chmod(dir, 0o711);
  const models = join(ROOT, "tests/fixtures/tiny/models");
  const serverLines = Object.entries({
    environment: "local",
    port: 0,
    shutdown_grace_seconds: 10,
    ...server,
  })
    .map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join("\n");
  const text = `[server]
${serverLines}
data_dir = ${JSON.stringify(join(dir, "data"))}

[models]
root = ${JSON.stringify(models)}
lock = ${JSON.stringify(join(ROOT, "tests/fixtures/tiny/models.lock"))}

[runtime]
intra_op_threads = 1
inter_op_threads = 1

${withQualityPreset(sections)}
`;
  const path = join(dir, "config.toml");
  await Deno.writeTextFile(path, text);
  return { path, dir, remove: () => Deno.remove(dir, { recursive: true }) };
}

/**
 * Points `temp`'s `[models] root` at `<temp.dir>/empty`, a folder that does
 * not exist, so the model check fails for the first file it looks at, with
 * `base = "sd15"` named (there `"auto"` would pick the derived fp32 set,
 * which the tiny lock does not declare).
 *
 * @returns The new models root.
 */
export async function emptyModelsRoot(temp: TempConfig): Promise<string> {
  const root = join(temp.dir, "empty");
  await Deno.writeTextFile(
    temp.path,
    (await Deno.readTextFile(temp.path)).replace(
      /root = .*/,
      `root = ${JSON.stringify(root)}\nbase = "sd15"`,
    ),
  );
  return root;
}
