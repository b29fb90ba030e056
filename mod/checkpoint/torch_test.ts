import { deepStrictEqual, rejects, strictEqual } from "node:assert";
import { join } from "node:path";
import { CheckpointError } from "./errors.ts";
import { openSd15Checkpoint, openVaeWeights } from "./sd15.ts";
import { openWeightFile } from "./weight_file.ts";
import {
  EMA_OFFSET,
  originalVaeLayout,
  pickleBytes,
  type PyValue,
  stateDict,
  testSd15,
  testValues,
  torchFileBytes,
  writeDiffusersFolder,
  writeOriginalCkpt,
  type WriteTensor,
  writeTorchFile,
  zipBytes,
} from "./testing.ts";

async function inTemp(f: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-torch-" });
  try {
    await f(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

function refusal(path: string, re: RegExp) {
  return (e: Error) => {
    strictEqual(e instanceof CheckpointError, true, String(e));
    strictEqual(re.test(e.message), true, e.message);
    strictEqual(e.message.startsWith(path), true, e.message);
    strictEqual(e.message.includes("\n"), false);
    return true;
  };
}

const t = (shape: number[], dtype: WriteTensor["dtype"] = "F32", name = "t"): WriteTensor => ({
  shape,
  dtype,
  data: testValues(name, shape.reduce((a, b) => a * b, 1)),
});

for (const legacy of [false, true]) {
  const kind = legacy ? "legacy" : "zip";
  for (const dtype of ["F32", "F16", "BF16"] as const) {
    Deno.test(`torch ${kind}: an original-layout ${dtype} .ckpt with a state_dict wrapper reads like the safetensors one`, async () => {
      await inTemp(async (dir) => {
        const m = testSd15();
        const path = join(dir, "model.ckpt");
        await writeOriginalCkpt(path, m, {
          dtype,
          legacy,
          stateDictWrapper: true,
          ema: true,
          extraKeys: true,
        });
        const wf = await openWeightFile(path);
        strictEqual(wf.format, legacy ? "torch-legacy" : "torch-zip");
        wf.close();
        for (const ema of [false, true]) {
          const ck = await openSd15Checkpoint(path, { ema });
          strictEqual(ck.layout, "original");
          strictEqual(ck.format, legacy ? "torch-legacy" : "torch-zip");
          strictEqual(ck.ema, ema);
          for (
            const [part, want] of [["unet", m.unet], ["vae", m.vae], [
              "textEncoder",
              m.textEncoder,
            ]] as const
          ) {
            const got = ck[part];
            deepStrictEqual([...got.keys()].sort(), [...want.keys()].sort());
            for (const [name, w] of want) {
              const g = got.get(name)!;
              deepStrictEqual(g.shape, w.shape, name);
              strictEqual(g.dtype, dtype);
              const off = ema && part === "unet" ? EMA_OFFSET : 0;
              deepStrictEqual(await g.read(), w.data.map((x) => x + off), name);
            }
          }
          // optimizer_states, epoch and global_step sit outside state_dict: not even counted.
          strictEqual(ck.ignored.count, m.unet.size + 2 + 5);
          ck.close();
        }
      });
    });
  }
}

Deno.test("torch: PyTorch 2.x members, parameters, storage offsets and shared storages are read", async () => {
  await inTemp(async (dir) => {
    const path = join(dir, "w.pt");
    const base = t([2, 3], "F16", "base");
    await writeTorchFile(path, {
      dict: [
        ["a", { tensor: base, parameter: true }],
        ["b", { tensor: t([4], "F32", "b"), storageOffset: 5 }],
        ["scalar", { tensor: { shape: [], dtype: "I64", data: Float32Array.of(-7) } }],
        // A size-1 dimension may have any stride (PyTorch leaves it as it was).
        ["c", { tensor: t([3, 1], "BF16", "c"), stride: [1, 99] }],
      ],
      ordered: true,
    }, { torch2Members: true, dir: "w" });
    const wf = await openWeightFile(path);
    deepStrictEqual([...wf.tensors.keys()], ["a", "b", "scalar", "c"]);
    deepStrictEqual(await wf.tensors.get("a")!.read(), base.data);
    deepStrictEqual(await wf.tensors.get("b")!.read(), testValues("b", 4));
    deepStrictEqual([...await wf.tensors.get("scalar")!.read()], [-7]);
    deepStrictEqual(wf.tensors.get("c")!.shape, [3, 1]);
    deepStrictEqual(await wf.tensors.get("c")!.read(), testValues("c", 3));
    wf.close();
  });
});

Deno.test("torch: a diffusers folder with .bin weights", async () => {
  await inTemp(async (dir) => {
    const m = testSd15();
    await writeDiffusersFolder(dir, m, { bin: true, dtype: "F16" });
    const ck = await openSd15Checkpoint(dir);
    strictEqual(ck.format, "torch-zip");
    strictEqual(ck.unet.size, m.unet.size);
    deepStrictEqual(
      await ck.textEncoder.get("text_model.final_layer_norm.weight")!.read(),
      m.textEncoder.get("text_model.final_layer_norm.weight")!.data,
    );
    ck.close();
  });
});

Deno.test("torch: a pickle naming a forbidden global is refused and nothing runs", async () => {
  await inTemp(async (dir) => {
    const marker = join(dir, "pwned");
    for (
      const [module, name] of [["posix", "system"], ["os", "system"], ["builtins", "eval"], [
        "torch",
        "load",
      ]]
    ) {
      for (const legacy of [false, true]) {
        const path = join(dir, `evil-${module}-${legacy}.ckpt`);
        const payload: PyValue = { reduce: [{ global: [module, name] }, [`touch ${marker}`]] };
        await writeTorchFile(path, {
          dict: [["state_dict", stateDict([["w", t([2])]])], ["x", payload]],
        }, { legacy });
        await rejects(
          openSd15Checkpoint(path),
          refusal(
            path,
            new RegExp(
              `refused: the pickle names the global \`${module}\\.${name}\`, which is not a tensor`,
            ),
          ),
        );
        await rejects(openWeightFile(path), CheckpointError);
      }
    }
    strictEqual(await Deno.stat(marker).then(() => true, () => false), false);
  });
});

Deno.test("torch: the same refusal for a protocol-4 STACK_GLOBAL", async () => {
  await inTemp(async (dir) => {
    // PROTO 4, SHORT_BINUNICODE "posix", MEMOIZE, SHORT_BINUNICODE "system", MEMOIZE, STACK_GLOBAL, ...
    const enc = new TextEncoder();
    const pkl = Uint8Array.from([
      0x80,
      4,
      0x8c,
      5,
      ...enc.encode("posix"),
      0x94,
      0x8c,
      6,
      ...enc.encode("system"),
      0x94,
      0x93,
      0x8c,
      4,
      ...enc.encode("true"),
      0x85,
      0x52,
      0x2e,
    ]);
    const path = join(dir, "evil.pt");
    await Deno.writeFile(
      path,
      await zipBytes([["archive/data.pkl", pkl], ["archive/version", enc.encode("3\n")]]),
    );
    await rejects(openWeightFile(path), refusal(path, /names the global `posix\.system`/));
  });
});

Deno.test("torch: corrupt zips and pickles are refused naming the problem", async () => {
  await inTemp(async (dir) => {
    const good = stateDict([["w", t([8])]]);
    const cases: [string, Uint8Array, RegExp][] = [
      [
        "extra.pt",
        await torchFileBytes(good, {
          extraMembers: [["archive/code/__torch__.py", new Uint8Array(3)]],
        }),
        /member named "archive\/code\/__torch__\.py"; a PyTorch file holds only/,
      ],
      [
        "deflated.pt",
        await torchFileBytes(good, { compress: "archive/data/0" }),
        /member archive\/data\/0 is compressed \(method 8, deflate\)/,
      ],
      [
        "twodirs.pt",
        await torchFileBytes(good, { extraMembers: [["other/version", new Uint8Array(2)]] }),
        /members in two folders, archive\/ and other\//,
      ],
      [
        "nopkl.pt",
        await zipBytes([["archive/version", new Uint8Array(2)]]),
        /no <dir>\/data\.pkl member/,
      ],
    ];
    const whole = await torchFileBytes(good);
    cases.push([
      "cut.pt",
      whole.subarray(0, whole.length - 30),
      /no end of central directory record/,
    ]);
    const moved = whole.slice();
    // Point the central directory past its end record.
    new DataView(moved.buffer).setUint32(moved.length - 22 + 16, moved.length, true);
    cases.push(["dirpast.pt", moved, /the central directory .* runs past its end record/]);
    const { pickle, storages } = pickleBytes(good);
    cases.push([
      "cutpkl.pt",
      await zipBytes([
        ["archive/data.pkl", pickle.subarray(0, pickle.length - 1)],
        ["archive/data/0", storages.get("0")!],
      ]),
      /data\.pkl ends before its STOP opcode/,
    ]);
    cases.push([
      "strided.pt",
      await torchFileBytes({ dict: [["w", { tensor: t([2, 3]), stride: [1, 2] }]] }),
      /tensor w: a non-contiguous view \(size \[2,3\], stride \[1,2\]\)/,
    ]);
    const legacy = await torchFileBytes(good, { legacy: true });
    cases.push([
      "legacy-cut.pt",
      legacy.subarray(0, legacy.length - 4),
      /storage 0 runs past the end of the file \(truncated\)/,
    ]);
    cases.push([
      "legacy-head.pt",
      legacy.subarray(0, 40),
      /the file ends inside its pickles \(truncated\)/,
    ]);
    let deep: PyValue = stateDict([["w", t([2])]]);
    for (let i = 0; i < 20; i++) deep = { dict: [["d", deep]] };
    cases.push(["deep.pt", await torchFileBytes(deep), /dicts nested more than 16 deep/]);
    cases.push([
      "list.pt",
      await torchFileBytes([1, 2]),
      /the pickle holds a list, not a dict of tensors/,
    ]);
    for (const [name, bytes, re] of cases) {
      const path = join(dir, name);
      await Deno.writeFile(path, bytes);
      await rejects(openWeightFile(path), refusal(path, re));
    }
  });
});

Deno.test("torch: a storage member shorter than its storage, or missing, is refused", async () => {
  await inTemp(async (dir) => {
    const enc = new TextEncoder();
    const { pickle, storages } = pickleBytes(stateDict([["w", t([8])]]));
    strictEqual(storages.get("0")!.length, 32);
    const short = join(dir, "short.pt");
    await Deno.writeFile(
      short,
      await zipBytes([
        ["archive/data.pkl", pickle],
        ["archive/data/0", new Uint8Array(16)],
        ["archive/version", enc.encode("3\n")],
      ]),
    );
    await rejects(
      openWeightFile(short),
      refusal(short, /storage 0 \(8 × F32\) needs 32 bytes, its member has 16/),
    );
    const missing = join(dir, "missing.pt");
    await Deno.writeFile(
      missing,
      await zipBytes([["archive/data.pkl", pickle], ["archive/version", enc.encode("3\n")]]),
    );
    await rejects(
      openWeightFile(missing),
      refusal(missing, /refers to storage 0, which has no member archive\/data\/0/),
    );
  });
});

Deno.test("torch: zip64 records (as past 4 GiB) are read", async () => {
  await inTemp(async (dir) => {
    const path = join(dir, "z64.ckpt");
    const w = t([3, 2], "F16", "z");
    await writeTorchFile(path, stateDict([["w", w]]), { zip64: true });
    const wf = await openWeightFile(path);
    deepStrictEqual(await wf.tensors.get("w")!.read(), w.data);
    wf.close();
  });
});

Deno.test("torch: a textual-inversion .pt and a LoRA .ckpt given as checkpoints are refused", async () => {
  await inTemp(async (dir) => {
    const ti = join(dir, "embedding.pt");
    await writeTorchFile(ti, {
      dict: [
        ["string_to_token", { dict: [["*", 265]] }],
        ["string_to_param", { dict: [["*", { tensor: t([2, 32]) }]] }],
        ["name", "my-style"],
        ["step", 3000],
      ],
    });
    await rejects(
      openSd15Checkpoint(ti),
      refusal(ti, /a textual-inversion embedding \(it has string_to_param\.\*\), not a checkpoint/),
    );
    const lora = join(dir, "lora.ckpt");
    await writeTorchFile(
      lora,
      stateDict([["lora_te_text_model_encoder_layers_0_mlp_fc1.lora_up.weight", t([4, 1])]]),
    );
    await rejects(openSd15Checkpoint(lora), refusal(lora, /a LoRA \(it has keys such as lora_te_/));
  });
});

Deno.test("torch: a standalone VAE .ckpt (state_dict wrapper, loss.* tensors) reads as diffusers' names", async () => {
  await inTemp(async (dir) => {
    const m = testSd15();
    const path = join(dir, "vae-ft-mse-840000-ema-pruned.ckpt");
    await writeTorchFile(path, {
      dict: [["global_step", 840001], [
        "state_dict",
        stateDict(originalVaeLayout(m.vae, "F32", true)),
      ]],
    });
    const v = await openVaeWeights(path);
    deepStrictEqual([...v.vae.keys()].sort(), [...m.vae.keys()].sort());
    const q = v.vae.get("encoder.mid_block.attentions.0.to_q.weight")!;
    deepStrictEqual(q.shape, [16, 16]);
    deepStrictEqual(await q.read(), m.vae.get("encoder.mid_block.attentions.0.to_q.weight")!.data);
    v.close();
  });
});
