/**
 * A converted set computes SD 1.x as its definitions do, not only as the
 * builder's own graphs do: every model of a set converted from test-sized
 * random weights against `helpers/sd15_numpy.py`, the same modules written
 * in plain numpy from diffusers' and transformers' definitions (float64), on
 * the same weights and inputs.
 */

import { ok, strictEqual } from "node:assert";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { convertSd15, type Sd15Component } from "../mod/convert/mod.ts";
import { randomTestWeights, TEST_TEXT_ENCODER } from "../mod/convert/sd15_testing.ts";
import {
  createSession,
  createSessionFromBytes,
  exposeLatentParameters,
  type Session,
  Tensor,
  toFloat32,
} from "../mod/onnx/mod.ts";
import { ignoredFor } from "./helpers/ignore.ts";

const PYTHON = Deno.env.get("SD15_TEST_PYTHON") ?? "/usr/bin/python3";
const SCRIPT = fileURLToPath(new URL("./helpers/sd15_numpy.py", import.meta.url));
const numpyThere = await new Deno.Command(PYTHON, { args: ["-c", "import numpy"] })
  .output().then((o) => o.success, () => false);
const noNumpy = numpyThere ? undefined : `no numpy for ${PYTHON} (Debian: python3-numpy)`;

const wave = (n: number, phase: number, scale = 1) =>
  Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + phase) * scale);

/** float32 tensors back to back and their {name: [offset, shape]} index (in elements). */
async function writeTensors(
  dir: string,
  stem: string,
  tensors: Array<[string, readonly number[], Float32Array]>,
): Promise<void> {
  const index: Record<string, [number, readonly number[]]> = {};
  const total = tensors.reduce((a, [, , v]) => a + v.length, 0);
  const blob = new Float32Array(total);
  let offset = 0;
  for (const [name, shape, values] of tensors) {
    blob.set(values, offset);
    index[name] = [offset, shape];
    offset += values.length;
  }
  await Deno.writeFile(join(dir, `${stem}.bin`), new Uint8Array(blob.buffer));
  await Deno.writeTextFile(join(dir, `${stem}.json`), JSON.stringify(index));
}

const RESIDUAL_CHANNELS = [32, 32, 32, 32, 64, 64, 64, 64, 64, 64, 64, 64, 64];
const RESIDUAL_LEVEL = [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3];

Deno.test({
  ...ignoredFor(
    noNumpy,
    "converted set: every model computes what numpy computes from the diffusers definitions",
  ),
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "converted_reference_" });
    try {
      const weights = randomTestWeights(91);
      const set = join(dir, "set");
      await convertSd15(weights, {
        outDir: set,
        components: ["text_encoder", "unet", "controlnet_unet", "vae_decoder", "vae_encoder"],
        tokenizer: false,
        scheduler: false,
      });
      const all: Array<[string, readonly number[], Float32Array]> = [];
      for (const map of [weights.unet, weights.textEncoder, weights.vae]) {
        for (const [name, e] of map) all.push([name, e.shape, await e.read()]);
      }
      await writeTensors(dir, "weights", all);

      const ids = new Int32Array(77).fill(49407);
      ids.set([49406, 320, 1929, 530, 518, 3240, 49407]);
      const inputs: Record<string, [number[], Float32Array]> = {
        input_ids: [[1, 77], Float32Array.from(ids)],
        sample: [[1, 4, 8, 8], wave(256, 0)],
        timestep: [[1], Float32Array.of(761)],
        encoder_hidden_states: [[1, 77, 32], wave(77 * 32, 1)],
        latent_sample: [[1, 4, 8, 8], wave(256, 3, 2)],
        image: [[1, 3, 64, 64], wave(3 * 64 * 64, 4)],
      };
      RESIDUAL_CHANNELS.forEach((c, i) => {
        const s = 8 >> RESIDUAL_LEVEL[i];
        inputs[`residual_${i}`] = [[1, c, s, s], wave(c * s * s, i + 5, 0.5)];
      });
      await writeTensors(
        dir,
        "inputs",
        Object.entries(inputs).map(([n, [shape, v]]) => [n, shape, v]),
      );
      const py = await new Deno.Command(PYTHON, {
        args: [SCRIPT, dir, String(TEST_TEXT_ENCODER.attentionHeads)],
        stderr: "piped",
      }).output();
      strictEqual(py.success, true, new TextDecoder().decode(py.stderr));
      const index = JSON.parse(await Deno.readTextFile(join(dir, "outputs.json"))) as Record<
        string,
        [number, number[]]
      >;
      const blob = new Float32Array((await Deno.readFile(join(dir, "outputs.bin"))).buffer);
      const expected = (name: string) => {
        const [offset, shape] = index[name];
        return blob.subarray(offset, offset + shape.reduce((a, b) => a * b, 1));
      };

      const t = (name: string) => new Tensor("float32", inputs[name][1], inputs[name][0]);
      const feeds: Record<Sd15Component, Record<string, Tensor>> = {
        text_encoder: { input_ids: new Tensor("int32", ids, [1, 77]) },
        unet: {
          sample: t("sample"),
          timestep: t("timestep"),
          encoder_hidden_states: t("encoder_hidden_states"),
        },
        controlnet_unet: {
          sample: t("sample"),
          timestep: t("timestep"),
          encoder_hidden_states: t("encoder_hidden_states"),
          ...Object.fromEntries(RESIDUAL_CHANNELS.map((_, i) => [
            i === 12 ? "mid_block_additional_residual" : `down_block_${i}_additional_residual`,
            t(`residual_${i}`),
          ])),
        },
        vae_decoder: { latent_sample: t("latent_sample") },
        vae_encoder: { sample: t("image") },
      };
      const open = async (c: Sd15Component): Promise<Session> => {
        const path = join(set, c, "model.onnx");
        if (c !== "vae_encoder") return await createSession(path, { intraOpThreads: 1 });
        const found = exposeLatentParameters(await Deno.readFile(path));
        if (found.kind !== "rewritten") throw new Error(found.kind);
        return await createSessionFromBytes(found.model, [], { intraOpThreads: 1 });
      };
      for (const key of Object.keys(index)) {
        const [c, output] = key.split(".") as [Sd15Component, string];
        const session = await open(c);
        let got: Float32Array;
        try {
          got = toFloat32((await session.run(feeds[c]))[output]);
        } finally {
          await session.release();
        }
        const want = expected(key);
        strictEqual(got.length, want.length, `${key}: size`);
        let scale = 0;
        let err = 0;
        for (let i = 0; i < want.length; i++) {
          scale = Math.max(scale, Math.abs(want[i]));
          err = Math.max(err, Math.abs(got[i] - want[i]));
        }
        ok(scale > 1e-3, `${key}: the reference computes something (max |y| ${scale})`);
        ok(
          err <= 1e-4 * Math.max(1, scale),
          `${key}: max |onnx - numpy| ${err} at max |y| ${scale}`,
        );
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
