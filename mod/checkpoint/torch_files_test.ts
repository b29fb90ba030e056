// Files written by PyTorch's own torch.save (testdata/make_torch_files.py), read by the
// restricted reader: what PyTorch writes, beside what the project's test writer produces.
import { deepStrictEqual, rejects, strictEqual } from "node:assert";
import { fileURLToPath } from "node:url";
import { CheckpointError } from "./errors.ts";
import { openWeightFile } from "./weight_file.ts";
import type { WeightDtype } from "./dtype.ts";

const data = (name: string) => fileURLToPath(new URL(`./testdata/${name}`, import.meta.url));
/** (arange(n) - k) / 8, as the script writes. */
const vals = (n: number, k: number) => Float32Array.from({ length: n }, (_, i) => (i - k) / 8);

const LDM: [string, WeightDtype, number[], Float32Array][] = [
  ["f32", "F32", [2, 3], vals(6, 3)],
  ["f16", "F16", [4], vals(4, 1)],
  ["bf16", "BF16", [5, 1], vals(5, 2)],
  ["row", "F32", [4], vals(12, 0).slice(4, 8)],
  ["big", "F32", [3, 4], vals(12, 0)],
  ["param", "F32", [3], vals(3, 0)],
  ["ids", "I64", [1, 4], Float32Array.of(0, 1, 2, 3)],
  ["scalar", "F32", [], Float32Array.of(2.5)],
  ["f64", "F64", [2], vals(2, 0)],
  ["flag", "BOOL", [2], Float32Array.of(1, 0)],
];

for (
  const [file, format] of [
    ["ldm_zip.ckpt", "torch-zip"],
    ["ldm_legacy.ckpt", "torch-legacy"],
    ["ldm_protocol4.ckpt", "torch-zip"],
    // With PyTorch Lightning's ModelCheckpoint callback object (NEWOBJ + BUILD) and its tensor.
    ["ldm_lightning.ckpt", "torch-zip"],
  ] as const
) {
  Deno.test(`torch.save files: ${file} (state_dict wrapper, views, parameter, numpy scalar, set)`, async () => {
    const wf = await openWeightFile(data(file));
    try {
      strictEqual(wf.format, format);
      // optimizer_states, epoch, global_step, loss and hparams lie outside state_dict.
      deepStrictEqual([...wf.tensors.keys()], LDM.map((t) => t[0]));
      for (const [name, dtype, shape, values] of LDM) {
        const t = wf.tensors.get(name)!;
        strictEqual(t.dtype, dtype, name);
        deepStrictEqual(t.shape, shape, name);
        deepStrictEqual(await t.read(), values, name);
      }
    } finally {
      wf.close();
    }
  });
}

Deno.test("torch.save files: a module's state_dict (OrderedDict with _metadata) as a .bin", async () => {
  const wf = await openWeightFile(data("module_state_dict.bin"));
  deepStrictEqual([...wf.tensors.keys()], ["0.weight", "0.bias"]);
  deepStrictEqual(wf.tensors.get("0.weight")!.shape, [3, 2]);
  strictEqual(wf.tensors.get("0.weight")!.dtype, "F16");
  deepStrictEqual(await wf.tensors.get("0.weight")!.read(), vals(6, 2));
  deepStrictEqual(await wf.tensors.get("0.bias")!.read(), vals(3, 1));
  wf.close();
});

Deno.test("torch.save files: a transposed (non-contiguous) tensor is refused with the reason", async () => {
  const path = data("transposed.pt");
  await rejects(openWeightFile(path), (e: Error) => {
    strictEqual(e instanceof CheckpointError, true);
    strictEqual(
      e.message,
      `${path}: tensor t: a non-contiguous view (size [3,2], stride [1,3]); only contiguous tensors are read (save the state dict after .contiguous())`,
    );
    return true;
  });
});

Deno.test("torch.save files: a checkpoint whose pickle calls os.system is refused and nothing runs", async () => {
  // The payload would run `touch /tmp/sd15-checkpoint-evil-ran` under Python's pickle.
  const marker = "/tmp/sd15-checkpoint-evil-ran";
  const exists = () => Deno.stat(marker).then(() => true, () => false);
  strictEqual(await exists(), false);
  const path = data("evil.ckpt");
  await rejects(openWeightFile(path), (e: Error) => {
    strictEqual(e instanceof CheckpointError, true);
    strictEqual(
      e.message.startsWith(
        `${path}: refused: the pickle names the global \`posix.system\`, which is not a tensor, storage or state-dict container; only `,
      ),
      true,
      e.message,
    );
    return true;
  });
  strictEqual(await exists(), false);
});
