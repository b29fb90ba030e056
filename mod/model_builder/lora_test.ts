import { deepStrictEqual, notDeepStrictEqual, ok, strictEqual } from "node:assert";
import { parseSafetensors } from "../lora/mod.ts";
import { buildTinyLora, encodeSafetensors, tinyLoraModules } from "./lora.ts";

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
