import { deepStrictEqual, ok, strictEqual } from "node:assert";
import { checkSession, floatTensor, type Session, toFloat32 } from "../onnx/mod.ts";
import { tinyModelFiles } from "./model_set.ts";
import { maxAbsDiff, openBuilt } from "./testing.ts";

const files = tinyModelFiles();

async function withSession<T>(path: string, fn: (s: Session) => Promise<T>): Promise<T> {
  const s = await openBuilt(files, path);
  try {
    return await fn(s);
  } finally {
    await s.release();
  }
}

Deno.test("depth: [1,3,H,W] → positive [1,H,W]; brighter is nearer (larger)", async () => {
  await withSession("annotators/depth.onnx", async (s) => {
    const io = checkSession("depth", s);
    strictEqual(io.depthOutputRank, 3);
    const H = 64;
    const W = 48;
    // controlnet_aux feeds x/127.5 - 1: left half bright (0.8), right half dark (-0.8).
    const img = new Float32Array(3 * H * W);
    for (let c = 0; c < 3; c++) {
      for (let y = 0; y < H; y++) {
        for (let x = 0; x < W; x++) img[(c * H + y) * W + x] = x < W / 2 ? 0.8 : -0.8;
      }
    }
    const out = await s.run({ [io.inputs.image.name]: floatTensor("float32", img, [1, 3, H, W]) });
    const d = out[io.outputs.depth.name];
    deepStrictEqual(d.dims, [1, H, W]);
    const v = toFloat32(d);
    ok(v.every((x) => x > 0), "inverse depth is positive");
    let left = 0;
    let right = 0;
    for (let y = 0; y < H; y++) {
      for (let x = 0; x < W; x++) x < W / 2 ? (left += v[y * W + x]) : (right += v[y * W + x]);
    }
    ok(left > right * 1.5, `bright half ${left} vs dark half ${right}`);
  });
});

/** YOLOX `demo_postprocess` + score = obj·cls (comfyui_controlnet_aux dw_onnx/cv_ox_det.py). */
function decodeYolox(out: Float32Array): { score: number; cls: number; box: number[] }[] {
  const dets: { score: number; cls: number; box: number[] }[] = [];
  let a = 0;
  for (const stride of [8, 16, 32]) {
    const n = 640 / stride;
    for (let gy = 0; gy < n; gy++) {
      for (let gx = 0; gx < n; gx++, a++) {
        const r = out.subarray(a * 85, a * 85 + 85);
        const cx = (r[0] + gx) * stride;
        const cy = (r[1] + gy) * stride;
        const bw = Math.exp(r[2]) * stride;
        const bh = Math.exp(r[3]) * stride;
        let best = 0;
        for (let c = 1; c < 80; c++) if (r[5 + c] > r[5 + best]) best = c;
        dets.push({
          score: r[4] * r[5 + best],
          cls: best,
          box: [cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2],
        });
      }
    }
  }
  strictEqual(a, 8400);
  return dets;
}

Deno.test("YOLOX contract: one confident person box around the bright region, none on black", async () => {
  await withSession("annotators/yolox_l.onnx", async (s) => {
    const io = checkSession("pose_detector", s);
    deepStrictEqual(io.imageSize, { height: 640, width: 640 });
    const run = async (img: Float32Array) => {
      const out = await s.run({
        [io.inputs.image.name]: floatTensor("float32", img, [1, 3, 640, 640]),
      });
      const t = out[io.outputs.detections.name];
      deepStrictEqual(t.dims, [1, 8400, 85]);
      return decodeYolox(toFloat32(t));
    };
    // Letterboxed (pad 114) image with a white figure at x 200..299, y 100..399.
    const img = new Float32Array(3 * 640 * 640).fill(114);
    for (let c = 0; c < 3; c++) {
      for (let y = 100; y < 400; y++) {
        img.fill(255, (c * 640 + y) * 640 + 200, (c * 640 + y) * 640 + 300);
      }
    }
    const dets = (await run(img)).filter((d) => d.score > 0.1); // score_thr of cv_ox_det.py
    strictEqual(dets.length, 1);
    strictEqual(dets[0].cls, 0); // person
    ok(dets[0].score > 0.3, `score ${dets[0].score}`); // kept by the DWPose person filter
    dets[0].box.forEach((v, i) =>
      ok(Math.abs(v - [200, 100, 300, 400][i]) < 0.01, `box ${dets[0].box}`)
    );

    strictEqual(
      (await run(new Float32Array(3 * 640 * 640))).filter((d) => d.score > 0.1).length,
      0,
    );
    strictEqual(
      (await run(new Float32Array(3 * 640 * 640).fill(114))).filter((d) => d.score > 0.1).length,
      0,
    );
  });
});

const MEAN = [123.675, 116.28, 103.53];
const STD = [58.395, 57.12, 57.375];

/** A DWPose crop (ImageNet-normalized) with a white figure in [x0,x1)×[y0,y1) on black. */
function crop(x0: number, x1: number, y0: number, y1: number): Float32Array {
  const H = 384;
  const W = 288;
  const out = new Float32Array(3 * H * W);
  for (let c = 0; c < 3; c++) {
    for (let y = 0; y < H; y++) {
      for (let x = 0; x < W; x++) {
        const px = x >= x0 && x < x1 && y >= y0 && y < y1 ? 255 : 0;
        out[(c * H + y) * W + x] = (px - MEAN[c]) / STD[c];
      }
    }
  }
  return out;
}

/** SimCC decode (cv_ox_pose.py): argmax per axis / 2, score = min of the maxima. */
function decodeSimcc(x: Float32Array, y: Float32Array, n: number) {
  const kps: { x: number; y: number; score: number }[][] = [];
  for (let b = 0; b < n; b++) {
    const list = [];
    for (let k = 0; k < 133; k++) {
      const rx = x.subarray((b * 133 + k) * 576, (b * 133 + k + 1) * 576);
      const ry = y.subarray((b * 133 + k) * 768, (b * 133 + k + 1) * 768);
      const ax = rx.indexOf(Math.max(...rx));
      const ay = ry.indexOf(Math.max(...ry));
      list.push({ x: ax / 2, y: ay / 2, score: Math.min(rx[ax], ry[ay]) });
    }
    kps.push(list);
  }
  return kps;
}

Deno.test("DWPose contract: SimCC peaks sit on the figure, follow it, and vanish on black", async () => {
  await withSession("annotators/dw-ll_ucoco_384.onnx", async (s) => {
    const io = checkSession("pose_estimator", s);
    strictEqual(io.keypoints, 133);
    deepStrictEqual(io.imageSize, { height: 384, width: 288 });
    const run = async (crops: Float32Array[]) => {
      const data = new Float32Array(crops.length * crops[0].length);
      crops.forEach((c, i) => data.set(c, i * c.length));
      const out = await s.run({
        [io.inputs.image.name]: floatTensor("float32", data, [crops.length, 3, 384, 288]),
      });
      deepStrictEqual(out.simcc_x.dims, [crops.length, 133, 576]);
      deepStrictEqual(out.simcc_y.dims, [crops.length, 133, 768]);
      return decodeSimcc(toFloat32(out.simcc_x), toFloat32(out.simcc_y), crops.length);
    };
    const figure = crop(100, 200, 50, 350);
    const shifted = crop(140, 240, 50, 350);
    const [a, b, black] = await run([figure, shifted, crop(0, 0, 0, 0)]);
    for (const kp of a) {
      ok(kp.score > 0.3, `visible: ${kp.score}`);
      ok(kp.x >= 100 && kp.x < 200 && kp.y >= 50 && kp.y < 350, `on the figure: ${kp.x},${kp.y}`);
    }
    // COCO order: 0 nose near the top, 15/16 ankles near the bottom; 5 = left shoulder on image right.
    ok(a[0].y < 50 + 0.2 * 300);
    ok(a[15].y > 50 + 0.8 * 300 && a[16].y > 50 + 0.8 * 300);
    ok(a[5].x > a[6].x);
    a.forEach((kp, k) => {
      ok(Math.abs(b[k].x - (kp.x + 40)) <= 0.5, `keypoint ${k} moves with the figure`);
      strictEqual(b[k].y, kp.y);
    });
    ok(black.every((kp) => kp.score < 0.3), "no keypoint is visible on a black crop");
    // Batch items are independent.
    const [single] = await run([shifted]);
    deepStrictEqual(single, b);
    ok(maxAbsDiff(a.map((k) => k.x), b.map((k) => k.x)) > 0);
  });
});
