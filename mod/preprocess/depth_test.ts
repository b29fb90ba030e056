import { deepStrictEqual, rejects, strictEqual, throws } from "node:assert";
import { depthInputImage, depthInputTensor, depthToImage, estimateDepth } from "./depth.ts";
import { ToolError } from "../mcp/tool.ts";
import type { RunModel, Tensor } from "./types.ts";
import { patternImage } from "./test_support.ts";

Deno.test("depth normalisation: min → 0, max → 255, linear between, truncated like astype(uint8)", () => {
  // Values 2, 4, 6 → (v − 2) / 4 → 0, 0.5, 1 → 0, 127 (127.5 truncated), 255.
  const img = depthToImage(new Float32Array([2, 4, 6]), 3, 1);
  deepStrictEqual([...img.data], [0, 0, 0, 127, 127, 127, 255, 255, 255]);
  // Negative and fractional model outputs normalise the same way.
  const neg = depthToImage(new Float32Array([-1.5, -0.5, 0.5, 2.5]), 2, 2);
  deepStrictEqual([neg.data[0], neg.data[3], neg.data[6], neg.data[9]], [0, 63, 127, 255]);
});

Deno.test("depth: near (largest inverse depth) is bright; constant map gives zeros", () => {
  const img = depthToImage(new Float32Array([0.1, 9.0, 3.0, 0.2]), 4, 1);
  strictEqual(img.data[3], 255); // the nearest pixel
  strictEqual(img.data[0], 0); // the farthest pixel
  strictEqual(img.data[6] > img.data[9], true);
  deepStrictEqual(
    [...depthToImage(new Float32Array([7, 7, 7, 7]), 2, 2).data],
    new Array(12).fill(0),
  );
  throws(() => depthToImage(new Float32Array([1, NaN]), 2, 1), ToolError);
  throws(() => depthToImage(new Float32Array([1, 2]), 3, 1), RangeError);
});

Deno.test("depth input: x / 127.5 − 1 in NCHW, RGB order", () => {
  const img = { width: 2, height: 1, data: new Uint8Array([0, 255, 51, 127, 128, 255]) };
  const t = depthInputTensor(img);
  deepStrictEqual(t.dims, [1, 3, 1, 2]);
  deepStrictEqual([t.data[0], t.data[2], t.data[4]], [
    -1,
    1,
    Math.fround(Math.fround(51 / 127.5) - 1),
  ]);
  deepStrictEqual([t.data[1], t.data[3], t.data[5]], [
    Math.fround(Math.fround(127 / 127.5) - 1),
    Math.fround(Math.fround(128 / 127.5) - 1),
    1,
  ]);
});

Deno.test("depth input size: resize_image at 512, or the model's fixed spatial dims", () => {
  const land = patternImage(512, 384);
  const a = depthInputImage(land, [1, 3, "height", "width"]);
  deepStrictEqual([a.width, a.height], [704, 512]);
  strictEqual(depthInputImage(patternImage(512, 512), [-1, 3, -1, -1]).width, 512);
  const fixed = depthInputImage(land, [1, 3, 384, 384]);
  deepStrictEqual([fixed.width, fixed.height], [384, 384]);
});

/** A fake depth model: records its input and returns a left-to-right ramp shaped `shape`. */
function rampModel(shape: "3d" | "4d", calls: Tensor[]): RunModel {
  return (feeds) => {
    const t = Object.values(feeds)[0];
    calls.push(t);
    const [, , h, w] = t.dims;
    const data = new Float32Array(w * h);
    for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) data[y * w + x] = x / (w - 1) * 10 - 3;
    return Promise.resolve({
      predicted_depth: { data, dims: shape === "3d" ? [1, h, w] : [1, 1, h, w] },
    });
  };
}

Deno.test("estimateDepth: model sees 704x512 for a 512x384 image; result is a grey 512x384 ramp", async () => {
  const calls: Tensor[] = [];
  const out = await estimateDepth(patternImage(512, 384), {
    run: rampModel("3d", calls),
    input: "pixel_values",
    dims: ["batch", 3, "height", "width"],
  }, { width: 512, height: 384 });
  deepStrictEqual(calls[0].dims, [1, 3, 512, 704]);
  deepStrictEqual([out.width, out.height], [512, 384]);
  const px = (
    x: number,
    y: number,
  ) => [...out.data.subarray((y * 512 + x) * 3, (y * 512 + x) * 3 + 3)];
  deepStrictEqual(px(0, 100), [0, 0, 0]);
  deepStrictEqual(px(511, 100), [255, 255, 255]);
  const mid = px(256, 200);
  strictEqual(mid[0] === mid[1] && mid[1] === mid[2], true);
  strictEqual(Math.abs(mid[0] - 127) <= 2, true);
  // Monotone along the ramp.
  for (let x = 1; x < 512; x++) strictEqual(px(x, 50)[0] >= px(x - 1, 50)[0], true);
});

Deno.test("estimateDepth: fixed [1,3,384,384] input and a [1,1,H,W] output", async () => {
  const calls: Tensor[] = [];
  const out = await estimateDepth(patternImage(384, 512), {
    run: rampModel("4d", calls),
    input: "x",
    dims: [1, 3, 384, 384],
  }, { width: 384, height: 512 });
  deepStrictEqual(calls[0].dims, [1, 3, 384, 384]);
  deepStrictEqual([out.width, out.height], [384, 512]);
});

Deno.test("estimateDepth: a wrongly shaped output is an inference error", async () => {
  const bad: RunModel = () =>
    Promise.resolve({ y: { data: new Float32Array(6), dims: [2, 1, 3] } });
  await rejects(
    estimateDepth(patternImage(64, 64), { run: bad, input: "x", dims: [1, 3, 64, 64] }, {
      width: 64,
      height: 64,
    }),
    (e: unknown) =>
      e instanceof ToolError && e.category === "inference" && /\[2, 1, 3\]/.test(e.message),
  );
});

Deno.test("estimateDepth rejects a non-integer output size", async () => {
  const never: RunModel = () => Promise.reject(new Error("must not run"));
  await rejects(
    estimateDepth(patternImage(8, 8), { run: never, input: "x", dims: [1, 3, 8, 8] }, {
      width: 0,
      height: 8,
    }),
    RangeError,
  );
});

Deno.test("depthInputTensor feeds x/255 for 'unit' models and x/127.5-1 by default", () => {
  const image = { width: 2, height: 1, data: new Uint8Array([0, 51, 255, 128, 1, 254]) };
  const unit = depthInputTensor(image, "unit");
  const signed = depthInputTensor(image);
  // NCHW planes: R = [0, 128], G = [51, 1], B = [255, 254].
  const order = [0, 128, 51, 1, 255, 254];
  deepStrictEqual(Array.from(unit.data), order.map((x) => Math.fround(x / 255)));
  deepStrictEqual(
    Array.from(signed.data),
    order.map((x) => Math.fround(Math.fround(x / 127.5) - 1)),
  );
  deepStrictEqual(unit.dims, [1, 3, 1, 2]);
});
