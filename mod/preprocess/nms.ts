/**
 * Non-maximum suppression as YOLOX's numpy demo does it (DWPose
 * `cv_ox_det.py` `nms` / `multiclass_nms`, class-aware). Boxes and scores are
 * float32 arrays there, so every intermediate here is rounded to float32
 * (`Math.fround`) to take the same keep/suppress decisions, including the
 * legacy `+ 1` in widths and areas.
 *
 * `scores.argsort()[::-1]` orders by descending score; numpy's sort is not
 * stable, and for equal scores we put the higher index first (a stable
 * ascending sort, reversed).
 *
 * @module
 */

const f = Math.fround;

/**
 * Single-class NMS: indices (into `boxes`) of the kept boxes, best first.
 * `boxes` holds `x1, y1, x2, y2` per box, `scores` one score per box.
 */
export function nms(boxes: Float32Array, scores: Float32Array, iouThreshold: number): number[] {
  const n = scores.length;
  if (boxes.length !== n * 4) {
    throw new RangeError(`nms: ${boxes.length / 4} boxes for ${n} scores`);
  }
  const thr = f(iouThreshold);
  const area = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const w = f(f(boxes[i * 4 + 2] - boxes[i * 4]) + 1);
    const h = f(f(boxes[i * 4 + 3] - boxes[i * 4 + 1]) + 1);
    area[i] = f(w * h);
  }
  let order = Array.from({ length: n }, (_, i) => i).sort((a, b) => scores[b] - scores[a] || b - a);
  const keep: number[] = [];
  while (order.length > 0) {
    const i = order[0];
    keep.push(i);
    const rest: number[] = [];
    for (let k = 1; k < order.length; k++) {
      const j = order[k];
      const xx1 = Math.max(boxes[i * 4], boxes[j * 4]);
      const yy1 = Math.max(boxes[i * 4 + 1], boxes[j * 4 + 1]);
      const xx2 = Math.min(boxes[i * 4 + 2], boxes[j * 4 + 2]);
      const yy2 = Math.min(boxes[i * 4 + 3], boxes[j * 4 + 3]);
      const w = Math.max(0, f(f(xx2 - xx1) + 1));
      const h = Math.max(0, f(f(yy2 - yy1) + 1));
      const inter = f(w * h);
      const ovr = f(inter / f(f(area[i] + area[j]) - inter));
      // np.where(ovr <= thr): NaN (0/0) is dropped, as in numpy.
      if (ovr <= thr) rest.push(j);
    }
    order = rest;
  }
  return keep;
}

/** One detection after NMS. */
export interface Detection {
  x1: number;
  y1: number;
  x2: number;
  y2: number;
  score: number;
  classIndex: number;
}

/**
 * Class-aware multi-class NMS (`multiclass_nms`): for each class, boxes with
 * score > `scoreThreshold` go through {@link nms}; results are concatenated
 * class by class. `classes` limits the work to some classes: NMS of one
 * class never affects another, so the detections of the listed classes are
 * the same as when all are processed.
 */
export function multiclassNms(
  boxes: Float32Array,
  scores: Float32Array,
  numClasses: number,
  iouThreshold: number,
  scoreThreshold: number,
  classes?: readonly number[],
): Detection[] {
  const n = boxes.length / 4;
  if (scores.length !== n * numClasses) {
    throw new RangeError(
      `multiclassNms: ${scores.length} scores for ${n} boxes x ${numClasses} classes`,
    );
  }
  const thr = f(scoreThreshold);
  const out: Detection[] = [];
  const list = classes ?? Array.from({ length: numClasses }, (_, c) => c);
  for (const c of list) {
    const idx: number[] = [];
    for (let i = 0; i < n; i++) if (scores[i * numClasses + c] > thr) idx.push(i);
    if (idx.length === 0) continue;
    const vb = new Float32Array(idx.length * 4);
    const vs = new Float32Array(idx.length);
    idx.forEach((i, k) => {
      vb.set(boxes.subarray(i * 4, i * 4 + 4), k * 4);
      vs[k] = scores[i * numClasses + c];
    });
    for (const k of nms(vb, vs, iouThreshold)) {
      out.push({
        x1: vb[k * 4],
        y1: vb[k * 4 + 1],
        x2: vb[k * 4 + 2],
        y2: vb[k * 4 + 3],
        score: vs[k],
        classIndex: c,
      });
    }
  }
  return out;
}
