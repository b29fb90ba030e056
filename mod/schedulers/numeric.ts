/**
 * The few NumPy primitives diffusers' `set_timesteps` uses, reproduced value
 * for value so timesteps and sigmas come out as diffusers computes them
 * (numpy `numpy/_core/function_base.py` `linspace`, `multiarray` `arange`
 * and `interp`, `around`).
 *
 * @module
 */

/** `np.round` / `ndarray.round()`: round half to even. */
export function roundHalfEven(x: number): number {
  const r = Math.round(x);
  // Math.round rounds .5 up; numpy rounds a tie to the even neighbour.
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/**
 * `np.linspace(start, stop, num)` in float64: `arange(num) * step + start`
 * with `step = (stop - start) / (num - 1)` and the last value set to `stop`.
 */
export function npLinspace(start: number, stop: number, num: number): number[] {
  if (num === 1) return [start];
  const step = (stop - start) / (num - 1);
  const out = Array.from({ length: num }, (_, i) => i * step + start);
  if (num > 1) out[num - 1] = stop;
  return out;
}

/**
 * `np.arange(start, stop, step)` for floats: `ceil((stop - start) / step)`
 * values, the i-th being `start + i * ((start + step) - start)` as numpy's
 * fill function computes them.
 */
export function npArange(start: number, stop: number, step: number): number[] {
  const length = Math.max(0, Math.ceil((stop - start) / step));
  const delta = (start + step) - start;
  return Array.from({ length }, (_, i) => (i === 0 ? start : start + i * delta));
}

/**
 * `np.interp(x, np.arange(fp.length), fp)`: linear interpolation of a table
 * sampled at 0, 1, …, n-1, clamped at both ends, exact at integers.
 */
export function interpAtIndex(x: number, fp: ArrayLike<number>): number {
  const last = fp.length - 1;
  if (x <= 0) return fp[0];
  if (x >= last) return fp[last];
  const j = Math.floor(x);
  if (j === x) return fp[j];
  const slope = fp[j + 1] - fp[j];
  return slope * (x - j) + fp[j];
}
