import { deepStrictEqual, ok, strictEqual, throws } from "node:assert";
import { join } from "node:path";
import { agreement, imageAgreement, runGpuBench, stats, summary } from "./gpu.ts";
import { ignoredFor } from "../tests/helpers/ignore.ts";

Deno.test("stats: min, median (even and odd counts) and mean", () => {
  deepStrictEqual(stats([3, 1, 2]), { min: 1, median: 2, mean: 2, samples: [3, 1, 2] });
  strictEqual(stats([4, 1, 2, 3]).median, 2.5);
});

Deno.test("agreement: max and mean absolute error, relative to the reference's range; non-finite values counted", () => {
  const a = agreement(Float32Array.from([1, -4, 2]), Float32Array.from([1.5, -4, 1]));
  deepStrictEqual(a, { nonFinite: 0, maxAbs: 1, maxRel: 0.25, meanAbs: 0.5, refMaxAbs: 4 });
  // A NaN where the reference has a number is counted, not hidden by later values.
  const b = agreement(Float32Array.from([1, 2, 3]), Float32Array.from([NaN, 2, 3.5]));
  strictEqual(b.nonFinite, 1);
  strictEqual(b.maxAbs, 0.5);
  strictEqual(agreement(Float32Array.from([0]), Float32Array.from([0])).maxRel, 0);
  throws(() => agreement(new Float32Array(2), new Float32Array(3)), /2 vs 3 values/);
});

Deno.test("imageAgreement: PSNR in dB and the largest difference", () => {
  const same = imageAgreement(Uint8Array.from([0, 255]), Uint8Array.from([0, 255]));
  deepStrictEqual(same, { psnrDb: Infinity, maxDiff: 0 });
  // One of two values off by 255: MSE 255²/2 → 10·log10(2) dB.
  const off = imageAgreement(Uint8Array.from([0, 0]), Uint8Array.from([0, 255]));
  strictEqual(off.maxDiff, 255);
  ok(Math.abs(off.psnrDb - 10 * Math.log10(2)) < 1e-9);
});

Deno.test("the GPU measurement script on the tiny set with the CPU provider standing in for the GPU", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sd15-gpu-bench-" });
  try {
    const out = join(dir, "gpu.json");
    const r = await runGpuBench([
      "--provider",
      "cpu",
      "--runs",
      "2",
      "--steps",
      "3",
      "--agreement-steps",
      "2",
      "--out",
      out,
    ]);
    deepStrictEqual(JSON.parse(await Deno.readTextFile(out)), JSON.parse(JSON.stringify(r)));
    strictEqual(r.provider.provider, "cpu");
    strictEqual(r.set.folder, "sd15-fp16"); // the CPU computes float16 (emulated)
    strictEqual(r.set.unetDtype, "float16");
    strictEqual(r.components.unetStepBatch2.samples.length, 2);
    ok(r.components.vaeDecodeTiny, "the tiny decoder is in the set");
    // [2, 4, 8, 8] fp16 latents at 64×64.
    strictEqual(r.components.latentRoundTrip.bytesEachWay, 2 * 4 * 8 * 8 * 2);
    deepStrictEqual(
      [
        r.images.defaultPreset.steps,
        r.images.defaultPreset.totalMs.length,
        r.images.fastPreset.steps,
      ],
      [3, 1, 4],
    );
    // The CPU against itself: the same inputs give the same numbers, exactly.
    const a = r.agreement!;
    deepStrictEqual(
      [a.noisePrediction.maxAbs, a.noisePrediction.nonFinite, a.image.maxDiff, a.image.psnrDb],
      [0, 0, 0, Infinity],
    );
    ok(a.noisePrediction.refMaxAbs > 0.1, "the noise prediction is not all zeros");
    ok(summary(r).includes("cpu on "), summary(r));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** Debian's Python with python3-torch, when it is installed. */
const PYTHON = Deno.env.get("SD15_TEST_PYTHON") ?? "/usr/bin/python3";
const torchThere = await new Deno.Command(PYTHON, { args: ["-c", "import torch, numpy"] })
  .output().then((o) => o.success, () => false);

Deno.test({
  ...ignoredFor(
    torchThere ? undefined : `no torch for ${PYTHON} (Debian: python3-torch)`,
    "--torch: the same UNet file and inputs in PyTorch agree with ONNX Runtime",
  ),
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "sd15-gpu-bench-" });
    try {
      // fp32: torch 1.13 has no float16 convolution on the CPU.
      const r = await runGpuBench([
        ...["--provider", "cpu", "--set", "sd15", "--runs", "2", "--steps", "2"],
        ...["--agreement-steps", "2", "--torch", PYTHON, "--torch-device", "cpu"],
        ...["--out", join(dir, "gpu.json")],
      ]);
      const t = r.torch!;
      strictEqual(t.device, "cpu");
      strictEqual(t.dtype, "float32");
      strictEqual(t.unetStepBatch2.samples.length, 2);
      strictEqual(t.peakMiB, null);
      ok(t.vsCpu!.refMaxAbs > 0.1);
      ok(t.vsCpu!.maxRel < 1e-5, JSON.stringify(t.vsCpu));
      deepStrictEqual(t.vsProvider, t.vsCpu, "the provider is the CPU here");
      ok(summary(r).includes("torch "), summary(r));
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
