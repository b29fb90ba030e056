import { deepStrictEqual, strictEqual, throws } from "node:assert";
import { toOpenPose } from "./keypoints.ts";

/** COCO-WholeBody body indices by name (mmpose/COCO order). */
const COCO = {
  nose: 0,
  leye: 1,
  reye: 2,
  lear: 3,
  rear: 4,
  lsho: 5,
  rsho: 6,
  lelb: 7,
  relb: 8,
  lwri: 9,
  rwri: 10,
  lhip: 11,
  rhip: 12,
  lknee: 13,
  rknee: 14,
  lank: 15,
  rank: 16,
};
/** OpenPose-18 order by name; "neck" is computed. */
const OPENPOSE = [
  "nose",
  "neck",
  "rsho",
  "relb",
  "rwri",
  "lsho",
  "lelb",
  "lwri",
  "rhip",
  "rknee",
  "rank",
  "lhip",
  "lknee",
  "lank",
  "reye",
  "leye",
  "rear",
  "lear",
] as const;

/** 133 points where point i sits at (10i + 1, 10i + 2). */
function wholebody(score = 0.9): { pts: Array<[number, number]>; scores: number[] } {
  const pts = Array.from({ length: 133 }, (_, i) => [10 * i + 1, 10 * i + 2] as [number, number]);
  return { pts, scores: new Array(133).fill(score) };
}

Deno.test("COCO-WholeBody → OpenPose-18: each OpenPose joint is the COCO joint of the same name", () => {
  const { pts, scores } = wholebody();
  const pose = toOpenPose(pts, scores);
  strictEqual(pose.body.length, 18);
  OPENPOSE.forEach((name, i) => {
    if (name === "neck") return;
    const src = COCO[name];
    deepStrictEqual(pose.body[i], { x: 10 * src + 1, y: 10 * src + 2, score: 0.9 }, name);
  });
});

Deno.test("neck = mean of the shoulders, score 1 only when both shoulders > 0.3", () => {
  const { pts, scores } = wholebody();
  deepStrictEqual(toOpenPose(pts, scores).body[1], { x: 56, y: 57, score: 1 });
  // A shoulder at exactly 0.3 is itself visible (>= 0.3) but makes the neck invisible.
  scores[COCO.lsho] = 0.3;
  const pose = toOpenPose(pts, scores);
  strictEqual(pose.body[1], null);
  deepStrictEqual(pose.body[5], { x: 51, y: 52, score: 0.3 });
});

Deno.test("face = COCO 23..90 plus the two eyes; hands = 91..111 (left), 112..132 (right)", () => {
  const { pts, scores } = wholebody();
  const pose = toOpenPose(pts, scores);
  strictEqual(pose.face?.length, 70);
  deepStrictEqual(pose.face?.[0], { x: 231, y: 232, score: 0.9 });
  deepStrictEqual(pose.face?.[67], { x: 901, y: 902, score: 0.9 });
  deepStrictEqual(pose.face?.[68], pose.body[14]); // right eye
  deepStrictEqual(pose.face?.[69], pose.body[15]); // left eye
  strictEqual(pose.leftHand?.length, 21);
  deepStrictEqual(pose.leftHand?.[0], { x: 911, y: 912, score: 0.9 });
  deepStrictEqual(pose.rightHand?.[20], { x: 1321, y: 1322, score: 0.9 });
});

Deno.test("points below 0.3 are absent; an all-absent part is null (body: 18 nulls)", () => {
  const { pts, scores } = wholebody(0.1);
  scores[100] = 0.5; // one left-hand point
  const pose = toOpenPose(pts, scores);
  deepStrictEqual(pose.body, new Array(18).fill(null));
  strictEqual(pose.face, null);
  strictEqual(pose.rightHand, null);
  strictEqual(pose.leftHand?.filter((p) => p !== null).length, 1);
  deepStrictEqual(pose.leftHand?.[9], { x: 1001, y: 1002, score: 0.5 });
  throws(() => toOpenPose(pts.slice(1), scores.slice(1)), RangeError);
});
