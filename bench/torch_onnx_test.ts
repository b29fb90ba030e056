import { deepStrictEqual, ok, strictEqual } from "node:assert";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { Graph, Rng } from "../tests/fixtures/builder/mod.ts";
import { createSession, Tensor, toFloat32 } from "../mod/onnx/mod.ts";
import { agreement } from "./gpu.ts";
import { exportForTorch } from "./torch_export.ts";
import { ignoredFor } from "../tests/helpers/ignore.ts";

/** Debian's Python with python3-torch (the bench's `--torch`), when it is installed. */
const PYTHON = Deno.env.get("SD15_TEST_PYTHON") ?? "/usr/bin/python3";
const torchThere = await new Deno.Command(PYTHON, { args: ["-c", "import torch, numpy"] })
  .output().then((o) => o.success, () => false);
const noTorch = torchThere ? undefined : `no torch for ${PYTHON} (Debian: python3-torch)`;

/**
 * Every operator pattern the full-size SD 1.5 UNet builder emits
 * (`tests/fixtures/builder/sd15_full.ts`), at test size: the sinusoidal timestep
 * embedding, GroupNorm as Reshape → InstanceNormalization → Reshape(Shape),
 * Conv + SiLU, tokens via Reshape [0, C, -1] / Transpose, LayerNormalization,
 * cross-attention with Reshape [0, 0, heads, d] / Transpose / Softmax, GEGLU
 * with Split and Erf, back to an image with Reshape(Shape(like)), nearest
 * Resize by scales and by sizes.
 */
function unetOps(): Uint8Array {
  const g = new Graph("unet_ops");
  const rng = new Rng(5, "unet_ops");
  const w = (dims: number[]) =>
    g.init(
      "w",
      "float32",
      dims,
      Float32Array.from(rng.uniform(dims.reduce((a, b) => a * b, 1), 0.5)),
    );
  const x = g.input("x", "float32", ["batch", 8, 4, 4]);
  const t = g.input("t", "float32", ["batch"]);
  const ctx = g.input("ctx", "float32", ["batch", 5, 6]);
  // Timestep embedding: [B] → [B, 1] · [1, 4] → sin ‖ cos → [B, 8] → per channel.
  const phase = g.op("Mul", [g.op("Unsqueeze", [t, g.constI64([1])]), w([1, 4])]);
  const emb = g.op("Concat", [g.op("Sin", [phase]), g.op("Cos", [phase])], { axis: { i: 1 } });
  const temb = g.op("Unsqueeze", [g.op("MatMul", [emb, w([8, 8])]), g.constI64([2, 3])]);
  // GroupNorm (2 groups), Conv, SiLU, + time.
  const grouped = g.op("Reshape", [x, g.constI64([0, 2, -1])]);
  const normed = g.op("InstanceNormalization", [grouped, g.constF([1, 1]), g.constF([0, 0])], {
    epsilon: { f: 1e-5 },
  });
  const gn = g.op("Reshape", [normed, g.op("Shape", [x])]);
  const conv = g.op("Conv", [gn, w([8, 8, 3, 3]), w([8])], {
    kernel_shape: { ints: [3, 3] },
    pads: { ints: [1, 1, 1, 1] },
  });
  const h = g.op("Add", [g.op("Mul", [conv, g.op("Sigmoid", [conv])]), temb]);
  // Tokens, LayerNorm, cross-attention over ctx (2 heads of 4).
  const tokens = g.op("Transpose", [g.op("Reshape", [h, g.constI64([0, 8, -1])])], {
    perm: { ints: [0, 2, 1] },
  });
  const ln = g.op("LayerNormalization", [tokens, w([8]), w([8])], {
    axis: { i: -1 },
    epsilon: { f: 1e-5 },
  });
  const heads = (y: string, perm: number[]) =>
    g.op("Transpose", [g.op("Reshape", [y, g.constI64([0, 0, 2, 4])])], { perm: { ints: perm } });
  const q = heads(g.op("MatMul", [ln, w([8, 8])]), [0, 2, 1, 3]);
  const k = heads(g.op("MatMul", [ctx, w([6, 8])]), [0, 2, 3, 1]);
  const v = heads(g.op("MatMul", [ctx, w([6, 8])]), [0, 2, 1, 3]);
  const scores = g.op("Mul", [g.op("MatMul", [q, k]), g.constF([0.5])]);
  const attn = g.op("Transpose", [
    g.op("MatMul", [g.op("Softmax", [scores], { axis: { i: -1 } }), v]),
  ], {
    perm: { ints: [0, 2, 1, 3] },
  });
  const mixed = g.op("Add", [g.op("Reshape", [attn, g.constI64([0, 0, 8])]), tokens]);
  // GEGLU: Split in halves, a · gelu(gate) with gelu(x) = x/2 · (1 + erf(x/√2)).
  const [a, gate] = g.opN("Split", [g.op("MatMul", [mixed, w([8, 16])]), g.constI64([8, 8])], 2, {
    axis: { i: -1 },
  });
  const erf = g.op("Erf", [g.op("Mul", [gate, g.constF([Math.SQRT1_2])])]);
  const gelu = g.op("Mul", [
    g.op("Mul", [gate, g.constF([0.5])]),
    g.op("Add", [erf, g.constF([1])]),
  ]);
  const ff = g.op("Add", [g.op("MatMul", [g.op("Mul", [a, gelu]), w([8, 8])]), mixed]);
  // Back to NCHW, then nearest ×2 by scales and by sizes.
  const image = g.op("Reshape", [
    g.op("Transpose", [ff], { perm: { ints: [0, 2, 1] } }),
    g.op("Shape", [h]),
  ]);
  const nearest = {
    mode: { s: "nearest" },
    coordinate_transformation_mode: { s: "asymmetric" },
    nearest_mode: { s: "floor" },
  } as const;
  const up = g.op("Resize", [image, "", g.constF([1, 1, 2, 2])], nearest);
  const nc = g.op("Shape", [x], { start: { i: 0 }, end: { i: 2 } });
  const sizes = g.op("Concat", [nc, g.constI64([16, 16])], { axis: { i: 0 } });
  const up2 = g.op("Resize", [up, "", "", sizes], nearest);
  g.output(up2, "y", "float32", ["batch", 8, 16, 16]);
  return g.encode({ opset: 17 }).model;
}

Deno.test({
  ...ignoredFor(
    noTorch,
    `torch_onnx.py computes the full UNet's operator patterns as ONNX Runtime does`,
  ),
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "sd15-torch-ops-" });
    try {
      const modelPath = join(dir, "ops.onnx");
      await Deno.writeFile(modelPath, unetOps());
      const rng = new Rng(9, "feeds");
      const feeds = {
        x: new Tensor("float32", Float32Array.from(rng.uniform(2 * 8 * 16, 2)), [2, 8, 4, 4]),
        t: new Tensor("float32", Float32Array.from([999, 21]), [2]),
        ctx: new Tensor("float32", Float32Array.from(rng.uniform(2 * 5 * 6, 1)), [2, 5, 6]),
      };
      const session = await createSession(modelPath, { intraOpThreads: 1 });
      const reference = Float32Array.from(toFloat32((await session.run(feeds)).y));
      await session.release();
      const graph = await exportForTorch(modelPath, feeds, join(dir, "export"));
      const script = fileURLToPath(new URL("./torch_onnx.py", import.meta.url));
      const result = join(dir, "result.json");
      const out = await new Deno.Command(PYTHON, {
        args: [script, graph, "--device", "cpu", "--runs", "1", "--out", result],
        stderr: "piped",
      }).output();
      strictEqual(out.code, 0, new TextDecoder().decode(out.stderr));
      const r = JSON.parse(await Deno.readTextFile(result));
      deepStrictEqual(r.outputs.y.dims, [2, 8, 16, 16]);
      strictEqual(r.ms.length, 1);
      const bytes = await Deno.readFile(r.outputs.y.file);
      const torchY = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
      const a = agreement(reference, torchY);
      strictEqual(a.nonFinite, 0);
      ok(a.refMaxAbs > 0.5, "the graph computes something");
      ok(a.maxRel < 1e-5, JSON.stringify(a));
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  ...ignoredFor(noTorch, `torch_onnx.py names an operator it does not know`),
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "sd15-torch-ops-" });
    try {
      const g = new Graph("unknown");
      g.output(g.op("HardSwish", [g.input("x", "float32", [2])]), "y", "float32", [2]);
      const modelPath = join(dir, "m.onnx");
      await Deno.writeFile(modelPath, g.encode({ opset: 17 }).model);
      const x = new Tensor("float32", Float32Array.from([1, 2]), [2]);
      const graph = await exportForTorch(modelPath, { x }, join(dir, "export"));
      const script = fileURLToPath(new URL("./torch_onnx.py", import.meta.url));
      const out = await new Deno.Command(PYTHON, {
        args: [script, graph, "--device", "cpu", "--out", join(dir, "r.json")],
        stderr: "piped",
      }).output();
      strictEqual(out.success, false);
      ok(
        new TextDecoder().decode(out.stderr).includes(
          "ONNX operator HardSwish is not supported by torch_onnx.py",
        ),
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
