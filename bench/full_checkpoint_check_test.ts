import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { testSd15, writeOriginalSafetensors } from "../mod/checkpoint/testing.ts";
import {
  type CheckOptions,
  configuredSet,
  failing,
  FILES,
  parseCheckArgs,
  RUNS,
  summaryLine,
} from "./full_checkpoint_check.ts";
import { compareImages } from "./full_diffusers.ts";

const REPO = fileURLToPath(new URL("../", import.meta.url));

Deno.test("parseCheckArgs: both checkouts are needed; defaults; --small; bad numbers are named", () => {
  assert.match(
    parseCheckArgs(["--diffusers", "/d25"]) as string,
    /--diffusers SRC .* and --convert-src SRC/,
  );
  const o = parseCheckArgs(["--diffusers", "/d25", "--convert-src", "/d27"]) as CheckOptions;
  assert.equal(o.diffusers, "/d25");
  assert.equal(o.convertScript, "/d27/scripts/convert_diffusers_to_original_stable_diffusion.py");
  assert.deepEqual(
    [o.steps, o.seed, o.vaeSeed, o.size, o.small, o.keep, o.python],
    [1, 42, 43, 512, false, false, "/usr/bin/python3"],
  );
  assert.match(o.out, /\.cache\/bench\/checkpoint-check\.json$/);
  const small = parseCheckArgs([
    "--diffusers",
    "/d25",
    "--convert-src",
    "/d27",
    "--small",
    "--seed",
    "7",
    "--steps",
    "2",
  ]) as CheckOptions;
  assert.deepEqual([small.size, small.seed, small.vaeSeed, small.steps], [64, 7, 8, 2]);
  assert.match(small.out, /checkpoint-check-small\.json$/);
  const base = ["--diffusers", "/d", "--convert-src", "/e"];
  assert.match(parseCheckArgs([...base, "--steps", "0"]) as string, /--steps .* got 0/);
  assert.match(parseCheckArgs([...base, "--seed", "x"]) as string, /--seed .* got x/);
  assert.match(parseCheckArgs([...base, "--size", "64"]) as string, /size/);
});

Deno.test("RUNS: every form is added once per root, each compared with an image diffusers makes", () => {
  assert.deepEqual([...new Set(RUNS.map((r) => r.form))].sort(), ["diffusers", "fp16", "fp32"]);
  assert.equal(new Set(RUNS.map((r) => r.name)).size, RUNS.length);
  for (const r of RUNS) assert.ok(r.form in FILES);
  // The fp16 file against diffusers on the fp16 file's weights, not the fp32 ones.
  assert.equal(RUNS.find((r) => r.form === "fp16")!.reference, "fp16");
  // The VAE run is the only one with the second VAE, on both sides.
  assert.deepEqual(RUNS.filter((r) => r.vae).map((r) => [r.form, r.reference]), [[
    "fp32",
    "fp32-vae",
  ]]);
  assert.ok(RUNS.every((r) => r.vae === r.reference.endsWith("-vae")));
});

Deno.test("failing: a run over one grey level, or missing, is named", () => {
  const img = (d: number) => ({
    image: compareImages(Uint8Array.of(10, 20), Uint8Array.of(10 + d, 20)),
  });
  const all = Object.fromEntries(RUNS.map((r) => [r.name, img(1)]));
  assert.deepEqual(failing(all), []);
  assert.deepEqual(failing({ ...all, "fp32-vae": img(2) }), ["fp32-vae"]);
  const { fp16: _, ...rest } = all;
  assert.deepEqual(failing(rest), ["fp16"]);
});

Deno.test("summaryLine: the grey levels, mean, PSNR and the float differences when measured", () => {
  const image = compareImages(Uint8Array.of(0, 0, 0, 0), Uint8Array.of(1, 0, 0, 0));
  assert.equal(
    summaryLine("fp32", {
      image,
      latents: { maxAbs: 1.5e-4, scale: 70 },
      conditioningMaxAbs: 2e-6,
    }),
    "fp32: max 1 grey level, mean 0.2500, PSNR 54.2 dB, conditioning max |Δ| 2.00e-6, " +
      "latents max |Δ| 1.50e-4",
  );
  assert.equal(
    summaryLine("effect", { image: compareImages(Uint8Array.of(9), Uint8Array.of(0)) }),
    "effect: max 9 grey levels, mean 9.0000, PSNR 29.0 dB",
  );
});

Deno.test("configuredSet: reads the set that models add --write-config names (a test-size checkpoint and VAE)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "bench_checkpoint_check_" });
  try {
    const models = join(dir, "models");
    await Deno.mkdir(join(models, "checkpoints"), { recursive: true });
    await Deno.writeTextFile(join(dir, "config.toml"), '[models]\nroot = "models"\n');
    await Deno.writeTextFile(join(dir, "models.lock"), "");
    const model = testSd15({ vocab: 49408, positions: 77 });
    await writeOriginalSafetensors(join(models, "checkpoints", "ck.safetensors"), model);
    const add = async (...args: string[]) => {
      const out = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "--config",
          join(REPO, "deno.json"),
          "-P=models",
          "--quiet",
          join(REPO, "mod/models/cli.ts"),
          "add",
          ...args,
          "--write-config",
        ],
        cwd: dir,
        env: { NO_COLOR: "1" },
      }).output();
      assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    };
    await add("models/checkpoints/ck.safetensors");
    const first = configuredSet(await Deno.readTextFile(join(dir, "config.local.toml")));
    assert.equal(first.vae, undefined);
    assert.ok((await Deno.stat(join(models, first.base, "unet", "model.onnx"))).isFile);
    // The same file as a VAE: its first_stage_model part.
    await add("--component", "vae", "models/checkpoints/ck.safetensors");
    const second = configuredSet(await Deno.readTextFile(join(dir, "config.local.toml")));
    assert.equal(second.base, first.base);
    assert.ok((await Deno.stat(join(models, second.vae!, "vae_decoder", "model.onnx"))).isFile);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  assert.throws(() => configuredSet('[models]\nvae = "x"\n'), /no \[models\] base/);
});
