/**
 * Time-left estimates from the engine's measured speed: an exponential
 * moving average of the time per denoising step, and of the time an image
 * costs beyond its steps (prompt encoding, VAE decode, PNG encode). A new
 * machine has no measurements until its first steps, and says so.
 *
 * @module
 */

/** Weight of the newest measurement in the moving averages. */
const ALPHA = 0.3;

/** What is left of the work ahead of a result. */
export interface WorkLeft {
  /** Steps left in the image being made now (0 when none is running). */
  stepsLeftInImage: number;
  /** Whole images still to make after the current one. */
  imagesAfter: number;
  /** Denoising steps per image. */
  stepsPerImage: number;
}

/** Step and per-image timings of one engine. */
export class StepTimer {
  #stepMs: number | null = null;
  #overheadMs: number | null = null;
  #imageStart = 0;
  #lastStep = 0;
  #steps = 0;
  #now: () => number;

  /** Creates a timer with no measurements; `now` is replaceable in tests. */
  constructor(now: () => number = performance.now.bind(performance)) {
    this.#now = now;
  }

  /** An image starts. */
  imageStart(): void {
    this.#imageStart = this.#lastStep = this.#now();
    this.#steps = 0;
  }

  /** Step `step` of the current image finished. */
  step(step: number): void {
    const now = this.#now();
    // The first step also carries prompt encoding: it counts as overhead.
    if (step > 1 && this.#steps > 0) this.#stepMs = average(this.#stepMs, now - this.#lastStep);
    this.#lastStep = now;
    this.#steps = step;
  }

  /** The current image is done (or failed). */
  imageDone(): void {
    if (this.#stepMs === null || this.#steps === 0) return;
    const overhead = Math.max(0, this.#now() - this.#imageStart - this.#steps * this.#stepMs);
    this.#overheadMs = average(this.#overheadMs, overhead);
  }

  /** Measured milliseconds per step, or null before two steps of one image. */
  get stepMs(): number | null {
    return this.#stepMs;
  }

  /** Estimated milliseconds for `work`, or null without measurements. */
  estimateMs(work: WorkLeft): number | null {
    if (this.#stepMs === null) return null;
    const overhead = this.#overheadMs ?? this.#stepMs;
    const current = work.stepsLeftInImage > 0 ? work.stepsLeftInImage * this.#stepMs + overhead : 0;
    return current + work.imagesAfter * (work.stepsPerImage * this.#stepMs + overhead);
  }
}

function average(previous: number | null, sample: number): number {
  return previous === null ? sample : previous + ALPHA * (sample - previous);
}

/** "about 4 min 10 s", "about 35 s", "about 1 h 5 min". */
export function formatDuration(ms: number): string {
  const s = Math.max(1, Math.round(ms / 1000));
  if (s < 60) return `about ${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `about ${m} min${s % 60 ? ` ${s % 60} s` : ""}`;
  return `about ${Math.floor(m / 60)} h${m % 60 ? ` ${m % 60} min` : ""}`;
}
