/**
 * Choosing among output sizes by an input's shape.
 *
 * @module
 */

/** A width and height in pixels. */
export interface Size {
  /** Width in pixels. */
  width: number;
  /** Height in pixels. */
  height: number;
}

/**
 * The index of the size in `sizes` whose aspect ratio is closest to
 * `width`×`height`, compared as log ratios (so 4:3 and 3:4 are equally far
 * from square); the first of equally close ones.
 */
export function closestAspect(width: number, height: number, sizes: ReadonlyArray<Size>): number {
  if (sizes.length === 0) throw new RangeError("closestAspect: no sizes to choose from");
  const ratio = Math.log(width / height);
  let best = 0;
  let distance = Infinity;
  sizes.forEach((s, i) => {
    const d = Math.abs(ratio - Math.log(s.width / s.height));
    if (d < distance - 1e-12) {
      best = i;
      distance = d;
    }
  });
  return best;
}
