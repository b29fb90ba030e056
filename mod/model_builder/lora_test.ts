import { deepStrictEqual, notDeepStrictEqual, ok, strictEqual } from "node:assert";
import { loraModules, parseSafetensors } from "../lora/mod.ts";
import {
  buildHyperSdLora,
  buildTinyLora,
  encodeSafetensors,
  kohyaLoraTensors,
  safetensorsLayout,
  type TinyLoraModule,
  tinyLoraModules,
} from "./lora.ts";
import { buildFullUnet, lcmLoraModules } from "./sd15_full.ts";

Deno.test("buildTinyLora: deterministic kohya keys with down/up/alpha shapes", () => {
  const a = buildTinyLora(7);
  deepStrictEqual(buildTinyLora(7), a, "same seed, same bytes");
  notDeepStrictEqual(buildTinyLora(8), a);
  // 8-byte aligned header (safetensors pads with spaces).
  const n = Number(new DataView(a.buffer).getBigUint64(0, true));
  strictEqual((8 + n) % 8, 0);
  const t = parseSafetensors(a, "tiny");
  const modules = tinyLoraModules();
  strictEqual(t.size, modules.length * 3);
  for (const m of modules) {
    const down = t.get(`${m.key}.lora_down.weight`)!;
    const up = t.get(`${m.key}.lora_up.weight`)!;
    deepStrictEqual(down.shape, m.kind === "conv" ? [2, m.in, m.k, m.k] : [2, m.in]);
    deepStrictEqual(up.shape, m.kind === "conv" ? [m.out, 2, 1, 1] : [m.out, 2]);
    deepStrictEqual(t.get(`${m.key}.alpha`), { dtype: "F16", shape: [], data: Float32Array.of(1) });
    ok(down.data.some((v) => v !== 0) && down.data.every((v) => Math.abs(v) <= 0.5));
  }
  const te = parseSafetensors(buildTinyLora(7, { targets: "text_encoder", alpha: null }), "te");
  deepStrictEqual([...te.keys()].every((k) => k.startsWith("lora_te_")), true);
  strictEqual(te.size, 2);
});

Deno.test("encodeSafetensors: F32 values round-trip exactly, F16 to the nearest half", () => {
  const data = Float32Array.of(0.1, -3.25, 1e-3);
  const bytes = encodeSafetensors([
    { name: "a", dtype: "F32", shape: [3], data },
    { name: "b", dtype: "F16", shape: [1, 3], data },
  ]);
  const t = parseSafetensors(bytes, "x");
  deepStrictEqual([t.get("a")!.dtype, t.get("b")!.dtype], ["F32", "F16"]);
  deepStrictEqual(t.get("a")!.data, data);
  // Nearest binary16 values: 0.1 → 0.0999755859375, 1e-3 → 0.0010004043579101562.
  deepStrictEqual([...t.get("b")!.data], [0.0999755859375, -3.25, 0.0010004043579101562]);
});

/** diffusers/PEFT names of the same modules: `unet.<dotted path>.<suffix>`. */
function peftTensors(
  modules: readonly TinyLoraModule[],
  down: string,
  up: string,
  alpha: boolean,
): Array<{ name: string; dtype: "F32"; shape: number[] }> {
  return kohyaLoraTensors(modules, 64, "F32", alpha).map((t) => {
    const m = modules.find((m) => t.name.startsWith(`${m.key}.`))!;
    const base = `unet.${m.scope.replaceAll("/", ".")}`;
    const suffix = t.name.slice(m.key.length + 1);
    const name = suffix === "lora_down.weight" ? down : suffix === "lora_up.weight" ? up : "alpha";
    return { name: `${base}.${name}`, dtype: "F32", shape: [...t.shape] };
  });
}

const sorted = <T extends { name: string }>(a: T[]) =>
  a.sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));

Deno.test("the published LoRA sizes fix their key layout: LCM's kohya fp16, Hyper-SD's kohya fp32", () => {
  const modules = lcmLoraModules(buildFullUnet(1));
  const pt = { format: "pt" };
  // latent-consistency/lcm-lora-sdv1-5 (kohya keys, per luosiallen/latent-consistency-model#57).
  strictEqual(
    safetensorsLayout(sorted(kohyaLoraTensors(modules, 64, "F16", true)), pt).size,
    134_621_556,
  );
  // ByteDance/Hyper-SD Hyper-SD15-1step-lora.safetensors: the same modules and rank in fp32.
  strictEqual(
    safetensorsLayout(sorted(kohyaLoraTensors(modules, 64, "F32", true)), pt).size,
    269_127_096,
  );
  // No other layout diffusers loads gives that size: without alphas, or with diffusers/PEFT
  // names (lora_A/lora_B, lora.down/lora.up), with or without alphas, with or without metadata.
  for (const alpha of [true, false]) {
    for (const meta of [pt, {}]) {
      const layouts = [
        ...(alpha ? [] : [kohyaLoraTensors(modules, 64, "F32", false)]),
        peftTensors(modules, "lora_A.weight", "lora_B.weight", alpha),
        peftTensors(modules, "lora.down.weight", "lora.up.weight", alpha),
      ];
      for (const l of layouts) {
        notDeepStrictEqual(safetensorsLayout(sorted(l), meta).size, 269_127_096);
      }
    }
  }
  notDeepStrictEqual(
    safetensorsLayout(sorted(kohyaLoraTensors(modules, 64, "F32", true))).size,
    269_127_096,
  );
});

Deno.test("buildHyperSdLora: kohya keys sorted by name, fp32 with alpha = rank, format pt; read as the merge reads it", () => {
  const modules = tinyLoraModules().filter((m) => m.key.startsWith("lora_unet_"));
  const bytes = buildHyperSdLora(3, { rank: 4 });
  deepStrictEqual(buildHyperSdLora(3, { rank: 4 }), bytes, "deterministic");
  const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  deepStrictEqual(header.__metadata__, { format: "pt" });
  const names = Object.keys(header).filter((k) => k !== "__metadata__");
  deepStrictEqual(names, [...names].sort(), "sorted by name, as safetensors saves");
  // Offsets follow the sorted order, and the header size is what safetensorsLayout computes.
  strictEqual(
    bytes.length,
    safetensorsLayout(sorted(kohyaLoraTensors(modules, 4, "F32", true)), {
      format: "pt",
    }).size,
  );
  const t = parseSafetensors(bytes, "hyper");
  strictEqual(t.size, modules.length * 3);
  for (const m of modules) {
    deepStrictEqual(t.get(`${m.key}.alpha`), { dtype: "F32", shape: [], data: Float32Array.of(4) });
    strictEqual(t.get(`${m.key}.lora_down.weight`)!.dtype, "F32");
  }
  const { modules: read, unknownKeys } = loraModules(t, "hyper");
  deepStrictEqual(unknownKeys, []);
  deepStrictEqual(read.map((m) => m.key).sort(), modules.map((m) => m.key).sort());
  ok(read.every((m) => m.alpha === 4 && m.target === "unet"));
});
