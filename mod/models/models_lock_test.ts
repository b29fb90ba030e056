/**
 * Checks on the repository's own models.lock: it parses, it pins every file the
 * default configuration needs (except those documented as missing), and the
 * small non-LFS entries have the sha256 of byte-identical rebuilds whose Git blob
 * ids match the ones published for stable-diffusion-v1-5 @ 451f4fe.
 */
import { deepStrictEqual, ok, strictEqual } from "node:assert";
import { createHash } from "node:crypto";
import { writeClipTokenizerFiles } from "../tokenizer/mod.ts";
import { loadConfig } from "../config/mod.ts";
import { readLock, readModelsLock } from "./lock.ts";
import { neededFiles, toLockPath } from "./required.ts";

const LOCK = new URL("../../models.lock", import.meta.url).pathname;
const CONFIG = new URL("../../config.toml", import.meta.url).pathname;

function gitBlobId(bytes: Uint8Array): string {
  return createHash("sha1").update(`blob ${bytes.length}\0`).update(bytes).digest("hex");
}
const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

Deno.test("models.lock: valid, pinned, one entry per path", async () => {
  const entries = await readModelsLock(LOCK);
  for (const e of entries) {
    // Real entries come from pinned Hugging Face commits only.
    // (The shipped lock has no local entries: every one has a url.)
    const url = e.url ?? `${e.path} has no url`;
    ok(/^https:\/\/huggingface\.co\/[^/]+\/[^/]+\/resolve\/[0-9a-f]{40}\//.test(url), url);
    // The URL names the same file name as the local path.
    strictEqual(url.split("/").pop(), e.path.split("/").pop(), url);
  }
  const paths = entries.map((e) => e.path).sort();
  deepStrictEqual(
    paths,
    [
      "annotators/depth.onnx",
      "annotators/dw-ll_ucoco_384.onnx",
      "annotators/yolox_l.onnx",
      "controlnet/depth.onnx",
      "controlnet/inpaint.onnx",
      "lora/hyper-sd/Hyper-SD15-1step-lora.safetensors",
      "lora/lcm-lora-sdv1-5/pytorch_lora_weights.safetensors",
      "sd15/controlnet_unet/model.onnx",
      "sd15/scheduler/scheduler_config.json",
      "sd15/text_encoder/model.onnx",
      "sd15/tokenizer/merges.txt",
      "sd15/tokenizer/vocab.json",
      "sd15/unet/model.onnx",
      "sd15/unet/weights.pb",
      "sd15/vae_decoder/model.onnx",
      "sd15/vae_encoder/model.onnx",
      "sd15-fp32/scheduler/scheduler_config.json",
      "sd15-fp32/text_encoder/model.onnx",
      "sd15-fp32/tokenizer/merges.txt",
      "sd15-fp32/tokenizer/vocab.json",
      "sd15-fp32/unet/model.onnx",
      "sd15-fp32/unet/weights.pb",
      "sd15-fp32/vae_decoder/model.onnx",
      "sd15-fp32/vae_encoder/model.onnx",
      "taesd/taesd_decoder.safetensors",
    ].sort(),
  );
});

Deno.test("models.lock: the default config on the CPU provider (fast preset) needs only pinned files and folders derived from them", async () => {
  const { files, derived } = await readLock(LOCK);
  const config = await loadConfig({ path: CONFIG, env: {} });
  strictEqual(config.generation.preset, "fast");
  const needed = neededFiles(config, files, derived);
  strictEqual(needed.outside.length, 0);
  const paths = needed.files.map((f) => toLockPath(f.abs, config.models.root));
  for (const f of needed.files) ok(f.entry || f.derived, `${f.path} is neither pinned nor derived`);
  // The tiny VAE, made from the pinned TAESD 1.2 decoder (madebyollin/taesd @ 931366c).
  ok(paths.includes("taesd/vae_decoder/model.onnx"));
  const taesd = files.find((e) => e.path === "taesd/taesd_decoder.safetensors")!;
  deepStrictEqual([taesd.size, taesd.sha256], [
    4895612,
    "7442e91c60df146ab22c9deb6386f7f540ef2a70dd676e3bfa88c3b4ae694357",
  ]);
  ok(taesd.url!.includes("/madebyollin/taesd/resolve/931366cc24b8bc15d6f682fa2e0352f1deec397b/"));
  // The fp32 set derived from the fp16 download, the LCM LoRA; no full VAE decoder (tiny is used).
  for (
    const p of [
      "sd15/unet/weights.pb",
      "sd15-fp32-derived/unet/weights.pb",
      "sd15-fp32-derived/text_encoder/model.onnx",
      "lora/lcm-lora-sdv1-5/pytorch_lora_weights.safetensors",
    ]
  ) ok(paths.includes(p), p);
  ok(!paths.some((p) => p.includes("vae_decoder/model.onnx") && !p.startsWith("taesd/")));
  // Every derived file's inputs are pinned with a size, a sha256 and a pinned-commit URL.
  for (const d of needed.derived) {
    for (const input of d.from) {
      const e = files.find((f) => f.path === input)!;
      ok(e.url && e.size > 0 && /^[0-9a-f]{64}$/.test(e.sha256), input);
    }
  }
});

Deno.test('models.lock: preset = "turbo" needs the pinned Hyper-SD LoRA (ByteDance/Hyper-SD @ 123f4ee) and nothing unpinned', async () => {
  const { files, derived } = await readLock(LOCK);
  const dir = await Deno.makeTempDir({ prefix: "lock_turbo_" });
  try {
    await Deno.copyFile(CONFIG, `${dir}/config.toml`);
    await Deno.writeTextFile(`${dir}/config.local.toml`, `[generation]\npreset = "turbo"\n`);
    const config = await loadConfig({ path: `${dir}/config.toml`, env: {} });
    strictEqual(config.generation.preset, "turbo");
    const needed = neededFiles(config, files, derived);
    for (const f of needed.files) {
      ok(f.entry || f.derived, `${f.path} is neither pinned nor derived`);
    }
    const paths = needed.files.map((f) => f.path);
    ok(paths.includes("taesd/vae_decoder/model.onnx"));
    ok(!paths.includes("lora/lcm-lora-sdv1-5/pytorch_lora_weights.safetensors"));
    const hyper = needed.files.find((f) => f.path.endsWith("Hyper-SD15-1step-lora.safetensors"))!;
    deepStrictEqual([hyper.entry!.size, hyper.entry!.sha256], [
      269_127_096,
      "a04fd9a535c1e56d38f7590ee72a13fd5ca0409853b4fff021e5a9482cf1ca3b",
    ]);
    ok(hyper.entry!.url!.includes(
      "/ByteDance/Hyper-SD/resolve/123f4ee05849b8241d5f451b089cb14a1019566d/",
    ));
    ok(hyper.key.startsWith("[lora] files"), hyper.key);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("models.lock: tokenizer entries match the files rebuilt from OpenAI's BPE list", async () => {
  const entries = await readModelsLock(LOCK);
  const dir = await Deno.makeTempDir({ prefix: "lock_tok_" });
  try {
    await writeClipTokenizerFiles(dir);
    for (
      const [name, blob] of [
        ["vocab.json", "469be27c5c010538f845f518c4f5e8574c78f7c8"],
        ["merges.txt", "76e821f1b6f0a9709293c3b6b51ed90980b3166b"],
      ]
    ) {
      const bytes = await Deno.readFile(`${dir}/${name}`);
      // Git blob id published for stable-diffusion-v1-5 @ 451f4fe tokenizer/<name>, and the
      // same blob in runwayml/stable-diffusion-v1-5 @ eb82621 (onnx branch).
      strictEqual(gitBlobId(bytes), blob, name);
      for (const set of ["sd15", "sd15-fp32"]) {
        const entry = entries.find((e) => e.path === `${set}/tokenizer/${name}`);
        ok(entry, `${set}/${name}`);
        strictEqual(entry.size, bytes.length, name);
        strictEqual(entry.sha256, sha256(bytes), name);
      }
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** The diffusers 0.6.0 PNDM config of SD 1.5, up to its last shared key (no closing brace). */
const PNDM_060 = `{
  "_class_name": "PNDMScheduler",
  "_diffusers_version": "0.6.0",
  "beta_end": 0.012,
  "beta_schedule": "scaled_linear",
  "beta_start": 0.00085,
  "num_train_timesteps": 1000,
  "set_alpha_to_one": false,
  "skip_prk_steps": true,
  "steps_offset": 1,
  "trained_betas": null`;

for (
  const [what, path, text, blob, size] of [
    // stable-diffusion-v1-5 @ 451f4fe: 308 bytes, Git blob 82d05b0e… in a Hugging Face cache listing.
    [
      "SD 1.5 (fp16 set)",
      "sd15/scheduler/scheduler_config.json",
      `${PNDM_060},\n  "clip_sample": false\n}\n`,
      "82d05b0e688d7ea94675678646c427907419346e",
      308,
    ],
    // runwayml/stable-diffusion-v1-5 @ eb82621 (onnx branch): 284 bytes, Git blob 9b8e2f78…
    // (the config before "clip_sample" was added on main).
    [
      "the fp32 set",
      "sd15-fp32/scheduler/scheduler_config.json",
      `${PNDM_060}\n}\n`,
      "9b8e2f78682dc088cfd08515e5d3a0a7409d3aac",
      284,
    ],
  ] as const
) {
  Deno.test(`models.lock: ${what}'s scheduler entry matches its commit's PNDM config bytes`, async () => {
    const bytes = new TextEncoder().encode(text);
    strictEqual(gitBlobId(bytes), blob);
    const entry = (await readModelsLock(LOCK)).find((e) => e.path === path);
    ok(entry);
    strictEqual(entry.size, size);
    strictEqual(entry.sha256, sha256(bytes));
  });
}
