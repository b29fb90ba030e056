import { deepStrictEqual, strictEqual, throws } from "node:assert";
import { ellipse2Poly, type Point, SIN_TABLE } from "./ellipse_poly.ts";
import { clipLine, drawLine, fillCircle, fillConvexPoly, line8 } from "./raster.ts";
import { cvRound, idiv, shr } from "./fixed_point.ts";
import {
  blank,
  countDiff,
  litPixels,
  pixel,
  readFixture,
  readJsonFixture,
} from "./test_support.ts";
import { saturateU8 } from "./fixed_point.ts";

const RED = [255, 0, 0] as const;

/** Every pixel of the rows/ranges given as [y, x1, x2]. */
function spans(list: Array<[number, number, number]>): string[] {
  const out: string[] = [];
  for (const [y, x1, x2] of list) for (let x = x1; x <= x2; x++) out.push(`${x},${y}`);
  return [...new Set(out)].sort();
}

Deno.test("cvRound rounds half to even; shr and idiv follow C++ int64 semantics", () => {
  deepStrictEqual([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, 76.50000000000001].map(cvRound), [
    0,
    2,
    2,
    -0,
    -2,
    -2,
    2,
    77,
  ]);
  strictEqual(shr(-1, 16), -1); // arithmetic shift floors
  strictEqual(shr(-65537, 16), -2);
  strictEqual(shr(2 ** 40 + 5, 16), 2 ** 24);
  strictEqual(idiv(-7, 2), -3); // truncation toward zero
  strictEqual(idiv(7, -2), -3);
  strictEqual(idiv(2 ** 52 + 1, 3), Math.floor((2 ** 52 + 1) / 3));
});

Deno.test("SinTable reproduces OpenCV's 7-decimal sine table as float32", () => {
  for (const deg of [0, 1, 30, 45, 89, 90, 91, 180, 225, 270, 359, 360, 450]) {
    const expected = Math.fround(Math.round(Math.sin(deg * Math.PI / 180) * 1e7) / 1e7);
    strictEqual(SIN_TABLE[deg] + 0, expected + 0, `sin(${deg})`); // +0 folds -0
  }
  strictEqual(SIN_TABLE[45], Math.fround(0.7071068));
  strictEqual(SIN_TABLE[450 - 60], Math.fround(0.5)); // cos 60°
});

Deno.test("ellipse2Poly: hand-derived from OpenCV's algorithm", () => {
  // Angle 0: x = c.x + w·cos(i°), y = c.y + h·sin(i°) from the float32
  // 7-decimal table, cvRound (ties to even), consecutive duplicates dropped.
  const table = (d: number) => Math.fround(Math.round(Math.sin(d * Math.PI / 180) * 1e7) / 1e7);
  const byHand = (c: Point, w: number, h: number): Point[] => {
    const pts: Point[] = [];
    for (let i = 0; i <= 360; i++) {
      const p = { x: cvRound(c.x + w * table(90 - i)), y: cvRound(c.y + h * table(i)) };
      const last = pts[pts.length - 1];
      if (!last || last.x !== p.x || last.y !== p.y) pts.push(p);
    }
    return pts;
  };
  const expected = byHand({ x: 100, y: 100 }, 20, 4);
  const got = ellipse2Poly({ x: 100, y: 100 }, { width: 20, height: 4 }, 0, 0, 360, 1);
  deepStrictEqual(got, expected);
  // First and quarter points by plain reasoning.
  deepStrictEqual(got[0], { x: 120, y: 100 });
  strictEqual(got.some((p) => p.x === 100 && p.y === 104), true);
  // Angle 90 swaps the roles of the axes: (c.x - 4·sin, c.y + 20·cos).
  const rot = ellipse2Poly({ x: 50, y: 50 }, { width: 20, height: 4 }, 90, 0, 360, 1);
  deepStrictEqual(rot[0], { x: 50, y: 70 });
  strictEqual(rot.every((p) => Math.abs(p.x - 50) <= 4 && Math.abs(p.y - 50) <= 20), true);
  // Ties round half to even: axes (5, 4) at 60° puts x at 10 + 5·0.5 = 12.5 → 12.
  const tie = ellipse2Poly({ x: 10, y: 10 }, { width: 5, height: 4 }, 0, 0, 360, 1);
  deepStrictEqual(tie, byHand({ x: 10, y: 10 }, 5, 4));
  strictEqual(tie.some((p) => p.x === 12 && p.y === 13), true);
  // A circle of radius 41: at 60° x = 20.5 → 20 (ties to even), so (21, 36) never appears.
  const big = ellipse2Poly({ x: 0, y: 0 }, { width: 41, height: 41 }, 0, 0, 360, 1);
  deepStrictEqual(big, byHand({ x: 0, y: 0 }, 41, 41));
  strictEqual(big.some((p) => p.x === 21 && p.y === 36), false);
  // Zero axes collapse to [center, center].
  deepStrictEqual(ellipse2Poly({ x: 3, y: 4 }, { width: 0, height: 0 }, 10, 0, 360, 1), [
    { x: 3, y: 4 },
    { x: 3, y: 4 },
  ]);
  throws(() => ellipse2Poly({ x: 0, y: 0 }, { width: 1, height: 1 }, 0, 0, 360, 0), RangeError);
});

Deno.test("ellipse2Poly matches cv2.ellipse2Poly (OpenCV 4.6 fixture)", () => {
  const fx = readJsonFixture<{
    ellipse2Poly: Array<
      { center: [number, number]; axes: [number, number]; angle: number; points: number[][] }
    >;
  }>("opencv_kernels.json");
  strictEqual(fx.ellipse2Poly.length, 7);
  for (const e of fx.ellipse2Poly) {
    const got = ellipse2Poly(
      { x: e.center[0], y: e.center[1] },
      {
        width: e.axes[0],
        height: e.axes[1],
      },
      e.angle,
      0,
      360,
      1,
    );
    deepStrictEqual(got.map((p) => [p.x, p.y]), e.points, `ellipse ${JSON.stringify(e.center)}`);
  }
});

Deno.test("line8 is OpenCV's 8-connected Bresenham walk", () => {
  const img = blank(10, 10);
  line8(img, { x: 0, y: 0 }, { x: 5, y: 2 }, RED);
  deepStrictEqual(litPixels(img), ["0,0", "1,0", "2,1", "3,1", "4,2", "5,2"]);
  // Drawn right to left it is the same set (left_to_right iteration).
  const back = blank(10, 10);
  line8(back, { x: 5, y: 2 }, { x: 0, y: 0 }, RED);
  deepStrictEqual(litPixels(back), litPixels(img));
  // Clipped at the border: only the inside part is drawn.
  const clipped = blank(4, 4);
  line8(clipped, { x: -3, y: 1 }, { x: 6, y: 1 }, RED);
  deepStrictEqual(litPixels(clipped), ["0,1", "1,1", "2,1", "3,1"]);
});

Deno.test("clipLine intersects with the image rectangle", () => {
  const p1 = { x: -10, y: 5 };
  const p2 = { x: 10, y: 5 };
  strictEqual(clipLine(8, 8, p1, p2), true);
  deepStrictEqual([p1, p2], [{ x: 0, y: 5 }, { x: 7, y: 5 }]);
  strictEqual(clipLine(8, 8, { x: -5, y: -5 }, { x: -1, y: 20 }), false);
});

Deno.test("fillCircle: OpenCV's filled midpoint circles of radius 1, 3, 4", () => {
  const r1 = blank(9, 9);
  fillCircle(r1, { x: 4, y: 4 }, 1, RED);
  deepStrictEqual(litPixels(r1), spans([[4, 3, 5], [3, 4, 4], [5, 4, 4]]));
  // radius 4 (joint circles): row half-widths 4,3,3,2,0 for |dy| = 0..4 → 49 pixels.
  const r4 = blank(20, 20);
  fillCircle(r4, { x: 10, y: 10 }, 4, RED);
  const rows4: Array<[number, number, number]> = [];
  [4, 3, 3, 2, 0].forEach((hw, dy) => {
    rows4.push([10 - dy, 10 - hw, 10 + hw], [10 + dy, 10 - hw, 10 + hw]);
  });
  deepStrictEqual(litPixels(r4), spans(rows4));
  strictEqual(litPixels(r4).length, 49);
  // radius 3 (face points): half-widths 3,2,2,0 → 29 pixels.
  const r3 = blank(20, 20);
  fillCircle(r3, { x: 10, y: 10 }, 3, RED);
  strictEqual(litPixels(r3).length, 29);
  deepStrictEqual(pixel(r3, 10, 13), [255, 0, 0]);
  deepStrictEqual(pixel(r3, 11, 13), [0, 0, 0]);
  // Clipped at the corner: only the in-image quarter remains.
  const corner = blank(20, 20);
  fillCircle(corner, { x: 0, y: 0 }, 4, RED);
  strictEqual(litPixels(corner).length, 5 + 4 + 4 + 3 + 1);
});

Deno.test("drawLine thickness 2: a 3-row band plus radius-1 round caps", () => {
  // Horizontal (10,10)-(20,10): offset dp = (0, ±1) in 16.16, so the quad
  // covers rows 9..11 for x 10..20; the caps add (9,10) and (21,10).
  const img = blank(32, 20);
  drawLine(img, { x: 10, y: 10 }, { x: 20, y: 10 }, RED, 2);
  deepStrictEqual(litPixels(img), spans([[9, 10, 20], [10, 9, 21], [11, 10, 20]]));
  // A single point: no quad (zero length), just one cap drawn twice.
  const dot = blank(8, 8);
  drawLine(dot, { x: 3, y: 3 }, { x: 3, y: 3 }, RED, 2);
  deepStrictEqual(litPixels(dot), spans([[3, 2, 4], [2, 3, 3], [4, 3, 3]]));
  throws(() => drawLine(dot, { x: 0, y: 0 }, { x: 1, y: 1 }, RED, 0), RangeError);
});

Deno.test("fillConvexPoly fills an axis-aligned rectangle exactly", () => {
  const img = blank(12, 12);
  fillConvexPoly(img, [{ x: 2, y: 3 }, { x: 8, y: 3 }, { x: 8, y: 6 }, { x: 2, y: 6 }], RED);
  deepStrictEqual(litPixels(img), spans([[3, 2, 8], [4, 2, 8], [5, 2, 8], [6, 2, 8]]));
  // Fewer than 3 points: only the outline (a line) is drawn.
  const two = blank(12, 12);
  fillConvexPoly(two, [{ x: 1, y: 1 }, { x: 4, y: 1 }], RED);
  deepStrictEqual(litPixels(two), spans([[1, 1, 4]]));
});

interface PrimitiveOp {
  kind: "ellipse" | "circle" | "line";
  center: [number, number];
  axes: [number, number];
  angle: number;
  radius: number;
  p1: [number, number];
  p2: [number, number];
  thickness: number;
  color: number[];
}

Deno.test("300 random limbs, circles and thick lines (partly off-canvas) match OpenCV", () => {
  const fx = readJsonFixture<{
    primitives: PrimitiveOp[];
    cases: Array<{ op: string; after: number; offset: number; length: number }>;
  }>("opencv_kernels.json");
  const blob = readFixture("opencv_kernels.bin.gz");
  const snapshots = new Map(
    fx.cases.filter((c) => c.op === "primitives").map((c) => [c.after, c] as const),
  );
  strictEqual(snapshots.size, 3);
  const img = blank(160, 120);
  fx.primitives.forEach((op, i) => {
    if (op.kind === "ellipse") {
      const poly = ellipse2Poly(
        { x: op.center[0], y: op.center[1] },
        {
          width: op.axes[0],
          height: op.axes[1],
        },
        op.angle,
        0,
        360,
        1,
      );
      fillConvexPoly(img, poly, op.color as [number, number, number]);
    } else if (op.kind === "circle") {
      fillCircle(
        img,
        { x: op.center[0], y: op.center[1] },
        op.radius,
        op.color as [number, number, number],
      );
    } else {
      const c = op.color.map(saturateU8) as [number, number, number];
      drawLine(img, { x: op.p1[0], y: op.p1[1] }, { x: op.p2[0], y: op.p2[1] }, c, op.thickness);
    }
    const snap = snapshots.get(i + 1);
    if (snap) {
      strictEqual(
        countDiff(img.data, blob.subarray(snap.offset, snap.offset + snap.length)),
        0,
        `after ${i + 1} ops`,
      );
    }
  });
});
