import { deepStrictEqual, rejects, strictEqual } from "node:assert";
import { detectPoses, estimatePose, NO_PERSON_MESSAGE, type PoseModels } from "./pose.ts";
import { drawPoses } from "./draw.ts";
import { ToolError } from "../mcp/tool.ts";
import type { RunModel, Tensor } from "./types.ts";
import { patternImage, pixel } from "./test_support.ts";

const ANCHORS = 8400;
const C = 85;

/** Detector returning one person box (100, 50)-(300, 450) for a 512x512 image (ratio 1.25). */
function fakeDetector(calls: Array<[string, Tensor]>, person = true): RunModel {
  return (feeds) => {
    for (const [k, v] of Object.entries(feeds)) calls.push([k, v]);
    const raw = new Float32Array(ANCHORS * C);
    if (person) {
      // Letterboxed: centre (250, 312.5), size 250x500, at stride-32 cell (7, 9).
      const o = (6400 + 1600 + 9 * 20 + 7) * C;
      raw.set([250 / 32 - 7, 312.5 / 32 - 9, Math.log(250 / 32), Math.log(500 / 32), 0.9, 0.95], o);
    }
    return Promise.resolve({ output: { data: raw, dims: [1, ANCHORS, C] } });
  };
}

/** Crop position (in the 288x384 crop) of whole-body keypoint j. */
function cropPos(j: number): [number, number] {
  return [30 + (j % 12) * 20, 20 + Math.floor(j / 12) * 30];
}

/** Pose model putting keypoint j at cropPos(j) with score `score`. */
function fakePose(calls: Array<[string, Tensor]>, score = 0.9, instances?: number): RunModel {
  return (feeds) => {
    for (const [k, v] of Object.entries(feeds)) calls.push([k, v]);
    const n = instances ?? Object.values(feeds)[0].dims[0];
    const x = new Float32Array(n * 133 * 576);
    const y = new Float32Array(n * 133 * 768);
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < 133; j++) {
        const [cx, cy] = cropPos(j);
        x[(i * 133 + j) * 576 + cx * 2] = score;
        y[(i * 133 + j) * 768 + cy * 2] = score;
      }
    }
    return Promise.resolve({
      simcc_x: { data: x, dims: [n, 133, 576] },
      simcc_y: { data: y, dims: [n, 133, 768] },
    });
  };
}

function models(
  det: Array<[string, Tensor]>,
  pose: Array<[string, Tensor]>,
  poseModel?: RunModel,
): PoseModels {
  return {
    detector: fakeDetector(det),
    detectorInput: "images",
    pose: poseModel ?? fakePose(pose),
    poseInput: "input",
  };
}

/** Image position of crop point (x, y): box (100,50,300,450) → centre (200,250), aspect-fixed 375x500. */
function imagePos([x, y]: [number, number]): [number, number] {
  return [x / 288 * 375 + 200 - 187.5, y / 384 * 500 + 250 - 250];
}

Deno.test("detectPoses: letterboxed detector input, batched crops, keypoints mapped back", async () => {
  const det: Array<[string, Tensor]> = [];
  const pose: Array<[string, Tensor]> = [];
  const poses = await detectPoses(patternImage(512, 512), models(det, pose));
  deepStrictEqual(det.map(([k, t]) => [k, t.dims]), [["images", [1, 3, 640, 640]]]);
  deepStrictEqual(pose.map(([k, t]) => [k, t.dims]), [["input", [1, 3, 384, 288]]]);
  strictEqual(poses.length, 1);
  const near = (a: number, b: number) => Math.abs(a - b) < 1e-3;
  // OpenPose nose = COCO 0, R-shoulder = COCO 6, left-hand wrist = COCO 91.
  for (
    const [k, j] of [[poses[0].body[0], 0], [poses[0].body[2], 6], [
      poses[0].leftHand![0],
      91,
    ]] as const
  ) {
    const [ex, ey] = imagePos(cropPos(j));
    strictEqual(
      near(k!.x, ex) && near(k!.y, ey),
      true,
      `keypoint ${j}: ${k!.x},${k!.y} vs ${ex},${ey}`,
    );
  }
  // Neck: mean of COCO 5 and 6, score 1.
  const [lx, ly] = imagePos(cropPos(5));
  const [rx, ry] = imagePos(cropPos(6));
  strictEqual(
    near(poses[0].body[1]!.x, (lx + rx) / 2) && near(poses[0].body[1]!.y, (ly + ry) / 2),
    true,
  );
  strictEqual(poses[0].body[1]!.score, 1);
});

Deno.test("estimatePose draws body only for openpose and everything for openpose_full", async () => {
  const image = patternImage(512, 512);
  const poses = await detectPoses(image, models([], []));
  const body = await estimatePose(image, models([], []), {
    handsAndFace: false,
    width: 512,
    height: 512,
  });
  deepStrictEqual(
    body.data,
    drawPoses(poses, 512, 512, { body: true, hands: false, face: false }).data,
  );
  const full = await estimatePose(image, models([], []), {
    handsAndFace: true,
    width: 512,
    height: 512,
  });
  deepStrictEqual(
    full.data,
    drawPoses(poses, 512, 512, { body: true, hands: true, face: true }).data,
  );
  // The nose joint is red; a right-hand point (COCO 120) is blue only in the full rendering.
  const [nx, ny] = imagePos(cropPos(0)).map(Math.trunc);
  deepStrictEqual(pixel(body, nx, ny), [255, 0, 0]);
  const [hx, hy] = imagePos(cropPos(120)).map(Math.trunc);
  deepStrictEqual(pixel(full, hx, hy), [0, 0, 255]);
  deepStrictEqual(pixel(body, hx, hy), [0, 0, 0]);
});

Deno.test("estimatePose draws at the requested size, scaling keypoints from the image", async () => {
  const out = await estimatePose(patternImage(512, 512), models([], []), {
    handsAndFace: false,
    width: 256,
    height: 384,
  });
  deepStrictEqual([out.width, out.height, out.data.length], [256, 384, 256 * 384 * 3]);
  const [nx, ny] = imagePos(cropPos(0));
  deepStrictEqual(pixel(out, Math.trunc(nx * 0.5), Math.trunc(ny * 0.75)), [255, 0, 0]);
});

Deno.test("estimatePose: no person → image error with the contract's message", async () => {
  const m: PoseModels = { ...models([], []), detector: fakeDetector([], false) };
  await rejects(
    estimatePose(patternImage(64, 64), m, { handsAndFace: true, width: 64, height: 64 }),
    (e: unknown) =>
      e instanceof ToolError && e.category === "image" &&
      e.message ===
        'no person found in input_image: the pose detector found no person with score > 0.3; use a photo with a clearly visible person or control_mode "depth"',
  );
  strictEqual(NO_PERSON_MESSAGE.startsWith("no person found in input_image"), true);
});

Deno.test("estimatePose: a person box without visible keypoints is also an image error", async () => {
  const m = models([], [], fakePose([], 0.2));
  await rejects(
    estimatePose(patternImage(512, 512), m, { handsAndFace: false, width: 512, height: 512 }),
    (e: unknown) =>
      e instanceof ToolError && e.category === "image" && /no keypoint/.test(e.message),
  );
});

Deno.test("estimatePose: pose output for the wrong number of people is an inference error", async () => {
  const m = models([], [], fakePose([], 0.9, 2));
  await rejects(
    estimatePose(patternImage(512, 512), m, { handsAndFace: false, width: 512, height: 512 }),
    (e: unknown) =>
      e instanceof ToolError && e.category === "inference" && /2 instance/.test(e.message),
  );
});

Deno.test("estimatePose finds SimCC outputs by size when they have other names", async () => {
  const image = patternImage(512, 512);
  const renamed: RunModel = async (feeds) => {
    const out = await fakePose([])(feeds);
    // Reversed order and anonymous names: y first, x second.
    return { "1234": out.simcc_y, "1235": out.simcc_x };
  };
  const want = await estimatePose(image, models([], []), {
    handsAndFace: true,
    width: 512,
    height: 512,
  });
  const got = await estimatePose(image, models([], [], renamed), {
    handsAndFace: true,
    width: 512,
    height: 512,
  });
  deepStrictEqual(got.data, want.data);
});
