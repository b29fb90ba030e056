import { deepStrictEqual, notDeepStrictEqual, strictEqual } from "node:assert";
import { drawPoses, handEdgeColor } from "./draw.ts";
import type { Keypoint, PoseResult } from "./types.ts";
import { countDiff, pixel, readFixture, readJsonFixture } from "./test_support.ts";

interface Scene {
  name: string;
  width: number;
  height: number;
  parts: { body: boolean; hands: boolean; face: boolean };
  people: PoseResult[];
}
const scenes = readJsonFixture<{ scenes: Scene[] }>("pose_scenes.json").scenes;
const bodyScene = scenes.find((s) => s.name === "body")!;
const fullScene = scenes.find((s) => s.name === "full")!;
const NO_PARTS = { body: true, hands: false, face: false };

// Reference values written out from controlnet_aux's `open_pose/util.py`, not imported from draw.ts.
const LIMBS = [
  [2, 3],
  [2, 6],
  [3, 4],
  [4, 5],
  [6, 7],
  [7, 8],
  [2, 9],
  [9, 10],
  [10, 11],
  [2, 12],
  [12, 13],
  [13, 14],
  [2, 1],
  [1, 15],
  [15, 17],
  [1, 16],
  [16, 18],
];
const COLORS = [
  [255, 0, 0],
  [255, 85, 0],
  [255, 170, 0],
  [255, 255, 0],
  [170, 255, 0],
  [85, 255, 0],
  [0, 255, 0],
  [0, 255, 85],
  [0, 255, 170],
  [0, 255, 255],
  [0, 170, 255],
  [0, 85, 255],
  [0, 0, 255],
  [85, 0, 255],
  [170, 0, 255],
  [255, 0, 255],
  [255, 0, 170],
  [255, 0, 85],
];
// int(c * 0.6): 255 → 153, 170 → 102, 85 → 51.
const DIM: Record<number, number> = { 0: 0, 85: 51, 170: 102, 255: 153 };
// matplotlib hsv_to_rgb([i/20, 1, 1]) * 255 in float64, then cvRound (computed offline in
// Python; note 76.50000000000001 → 77, 178.49999999999997 → 178, 229.5 → 230).
const HAND_COLORS = [
  [255, 0, 0],
  [255, 77, 0],
  [255, 153, 0],
  [255, 229, 0],
  [204, 255, 0],
  [128, 255, 0],
  [51, 255, 0],
  [0, 255, 25],
  [0, 255, 102],
  [0, 255, 179],
  [0, 255, 255],
  [0, 178, 255],
  [0, 102, 255],
  [0, 25, 255],
  [51, 0, 255],
  [128, 0, 255],
  [204, 0, 255],
  [255, 0, 230],
  [255, 0, 153],
  [255, 0, 77],
];
const HAND_EDGES = [
  [0, 1],
  [1, 2],
  [2, 3],
  [3, 4],
  [0, 5],
  [5, 6],
  [6, 7],
  [7, 8],
  [0, 9],
  [9, 10],
  [10, 11],
  [11, 12],
  [0, 13],
  [13, 14],
  [14, 15],
  [15, 16],
  [0, 17],
  [17, 18],
  [18, 19],
  [19, 20],
];

type P = { x: number; y: number };
function segDist(p: P, a: P, b: P): number {
  const dx = b.x - a.x;
  const dy = b.y - a.y;
  const len2 = dx * dx + dy * dy;
  const t = len2 === 0 ? 0 : Math.max(0, Math.min(1, ((p.x - a.x) * dx + (p.y - a.y) * dy) / len2));
  return Math.hypot(p.x - (a.x + t * dx), p.y - (a.y + t * dy));
}
const trunc = (k: Keypoint): P => ({ x: Math.trunc(k.x), y: Math.trunc(k.y) });
function limbSegments(people: PoseResult[]): Array<[P, P]> {
  const out: Array<[P, P]> = [];
  for (const p of people) {
    for (const [a, b] of LIMBS) {
      const k1 = p.body[a - 1];
      const k2 = p.body[b - 1];
      if (k1 && k2) out.push([k1, k2]);
    }
  }
  return out;
}

for (
  const [golden, scene, parts] of [
    ["pose_body.rgb.gz", bodyScene, bodyScene.parts],
    ["pose_full.rgb.gz", fullScene, fullScene.parts],
    ["pose_full_body_only.rgb.gz", fullScene, NO_PARTS],
  ] as const
) {
  Deno.test(`drawPoses equals the OpenCV golden ${golden}`, () => {
    const img = drawPoses(scene.people, scene.width, scene.height, parts);
    const want = readFixture(golden);
    strictEqual(want.length, scene.width * scene.height * 3);
    strictEqual(countDiff(img.data, want), 0);
  });
}

Deno.test("body: limb centres are the limb colour × 0.6, joint centres the joint colour", () => {
  const img = drawPoses(bodyScene.people, bodyScene.width, bodyScene.height, NO_PARTS);
  const a = bodyScene.people[0].body as Keypoint[];
  // Isolated limbs of person A (arms and legs), checked at the ellipse centre.
  for (const limb of [2, 3, 4, 5, 7, 8, 10, 11]) {
    const [i, j] = LIMBS[limb];
    const k1 = a[i - 1];
    const k2 = a[j - 1];
    const cx = Math.trunc((k1.x + k2.x) / 2);
    const cy = Math.trunc((k1.y + k2.y) / 2);
    deepStrictEqual(pixel(img, cx, cy), COLORS[limb].map((c) => DIM[c]), `limb ${limb}`);
  }
  a.forEach((k, i) =>
    deepStrictEqual(pixel(img, Math.trunc(k.x), Math.trunc(k.y)), COLORS[i], `joint ${i}`)
  );
  // A joint circle has radius 4: 4 px right of a joint is still the joint colour, not 6.
  const knee = trunc(a[9]);
  deepStrictEqual(pixel(img, knee.x + 4, knee.y), COLORS[9]);
  notDeepStrictEqual(pixel(img, knee.x + 6, knee.y), COLORS[9]);
});

Deno.test("body: pixels far from every limb and joint stay black", () => {
  const img = drawPoses(bodyScene.people, bodyScene.width, bodyScene.height, NO_PARTS);
  const segs = limbSegments(bodyScene.people);
  const joints = bodyScene.people.flatMap((p) => p.body.filter((k): k is Keypoint => k !== null));
  let checked = 0;
  for (let y = 0; y < bodyScene.height; y += 7) {
    for (let x = 0; x < bodyScene.width; x += 7) {
      const p = { x, y };
      if (segs.some(([s, e]) => segDist(p, s, e) < 20)) continue;
      if (joints.some((k) => Math.hypot(k.x - x, k.y - y) < 10)) continue;
      deepStrictEqual(pixel(img, x, y), [0, 0, 0], `(${x}, ${y})`);
      checked++;
    }
  }
  strictEqual(checked > 1500, true, `only ${checked} background samples`);
});

Deno.test("hands: edge pixels have the hsv colours; points blue; eps rule skips x < 1", () => {
  const person = fullScene.people[0];
  const img = drawPoses(fullScene.people, fullScene.width, fullScene.height, fullScene.parts);
  strictEqual(HAND_EDGES.every((_, i) => handEdgeColor(i).join() === HAND_COLORS[i].join()), true);
  const hands = [person.leftHand!, person.rightHand!];
  const face = person.face!.filter((k): k is Keypoint => k !== null);
  let checked = 0;
  hands.forEach((hand, h) => {
    HAND_EDGES.forEach(([a, b], i) => {
      const k1 = hand[a];
      const k2 = hand[b];
      if (!k1 || !k2 || Math.trunc(k2.x) < 1 || Math.trunc(k1.x) < 1) return;
      const p1 = trunc(k1);
      const p2 = trunc(k2);
      const mid = { x: Math.round((p1.x + p2.x) / 2), y: Math.round((p1.y + p2.y) / 2) };
      // Skip midpoints that something drawn later may cover.
      const laterEdges = hands.flatMap((hh, j) =>
        HAND_EDGES.filter((_, e) => j > h || e > i).map(([u, v]) => [hh[u], hh[v]])
      ).filter((e): e is [Keypoint, Keypoint] => !!e[0] && !!e[1]);
      if (laterEdges.some(([u, v]) => segDist(mid, trunc(u), trunc(v)) < 3.5)) return;
      const laterPoints = hands.slice(h).flat().filter((k): k is Keypoint => k !== null);
      if (
        laterPoints.some((k) => Math.hypot(Math.trunc(k.x) - mid.x, Math.trunc(k.y) - mid.y) < 5.5)
      ) {
        return;
      }
      if (face.some((k) => Math.hypot(k.x - mid.x, k.y - mid.y) < 4.5)) return;
      deepStrictEqual(pixel(img, mid.x, mid.y), HAND_COLORS[i], `hand ${h} edge ${i}`);
      checked++;
    });
  });
  strictEqual(checked >= 20, true, `only ${checked} hand edges checked`);
  // Hand points are (0, 0, 255) at their centres (the right hand is drawn last).
  for (const k of person.rightHand!) {
    if (k && Math.trunc(k.x) >= 1) {
      deepStrictEqual(pixel(img, Math.trunc(k.x), Math.trunc(k.y)), [0, 0, 255]);
    }
  }
  // Right-hand point 20 is at x = 0.6 → int 0, not > eps: neither it nor edge 19-20 is drawn.
  const p20 = person.rightHand![20]!;
  const p19 = trunc(person.rightHand![19]!);
  deepStrictEqual(pixel(img, 0, Math.trunc(p20.y)), [0, 0, 0]);
  deepStrictEqual(pixel(img, Math.round(p19.x / 2), Math.round((p19.y + p20.y) / 2)), [0, 0, 0]);
});

Deno.test("face: every point is white; body-only rendering has no hand or face pixels", () => {
  const person = fullScene.people[0];
  const full = drawPoses(fullScene.people, fullScene.width, fullScene.height, fullScene.parts);
  const face = person.face!.filter((k): k is Keypoint => k !== null);
  strictEqual(face.length, 69); // 68 + 2 eyes, one face point missing
  for (const k of face) {
    deepStrictEqual(pixel(full, Math.trunc(k.x), Math.trunc(k.y)), [255, 255, 255]);
  }

  const bodyOnly = drawPoses(fullScene.people, fullScene.width, fullScene.height, NO_PARTS);
  const segs = limbSegments(fullScene.people);
  const joints = person.body.filter((k): k is Keypoint => k !== null);
  const farFromBody = (k: Keypoint) =>
    segs.every(([s, e]) => segDist(k, s, e) > 10) &&
    joints.every((j) => Math.hypot(j.x - k.x, j.y - k.y) > 10);
  let checked = 0;
  for (const k of [...face, ...person.leftHand!, ...person.rightHand!]) {
    if (!k || Math.trunc(k.x) < 1 || Math.trunc(k.y) < 1 || !farFromBody(k)) continue; // eps rule
    deepStrictEqual(pixel(bodyOnly, Math.trunc(k.x), Math.trunc(k.y)), [0, 0, 0]);
    notDeepStrictEqual(pixel(full, Math.trunc(k.x), Math.trunc(k.y)), [0, 0, 0]);
    checked++;
  }
  strictEqual(checked >= 60, true, `only ${checked} hand/face points away from the body`);
  // No white anywhere without the face (no body colour is white).
  for (let i = 0; i < bodyOnly.data.length; i += 3) {
    if (bodyOnly.data[i] === 255 && bodyOnly.data[i + 1] === 255 && bodyOnly.data[i + 2] === 255) {
      throw new Error(`white pixel at ${i / 3} in the body-only rendering`);
    }
  }
});
