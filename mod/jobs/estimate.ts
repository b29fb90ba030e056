/**
 * Time-left estimates from this process's own measured speed. An image is
 * a head (prompt encoding, and for guided or inpaint calls the preprocessor
 * or the VAE encoder), its denoising steps, and a tail (VAE decode, PNG
 * encode, storing the result). Each part is measured on every image this
 * engine makes, per tool (a ControlNet step costs more than a plain one),
 * and the estimate uses the median of the recent ones: a one-off slow step
 * (the first runs of a fresh ONNX session, a garbage collection, progress
 * messages delivered late while the main thread was busy) does not skew it
 * as an average would. The very first image of the process is a warm-up and
 * counts only until a second one is measured. A process that has measured
 * no step says so instead of guessing.
 *
 * @module
 */

/** How many recent step intervals the medians use, per tool. */
const STEP_WINDOW = 64;
/** How many recent heads and tails the medians use, per tool. */
const IMAGE_WINDOW = 9;

/** Work still to do for one job, in the units the timer measures. */
export interface WorkLeft {
  /** The tool that made the job: its timings apply (another tool's when it has none). */
  tool: string;
  /** The image being made now (`step` of `steps` done), or null when none is. */
  current: { step: number; steps: number } | null;
  /** Whole images still to make after the current one. */
  images: number;
  /** Steps per image to assume when this tool has not been measured (`[generation] steps`). */
  stepsPerImage: number;
}

/** Recent samples, oldest first, at most `size`. */
class Window {
  readonly #size: number;
  readonly #values: number[] = [];

  constructor(size: number) {
    this.#size = size;
  }

  add(value: number): void {
    this.#values.push(value);
    if (this.#values.length > this.#size) this.#values.shift();
  }

  get size(): number {
    return this.#values.length;
  }

  median(): number | null {
    const n = this.#values.length;
    if (n === 0) return null;
    const sorted = [...this.#values].sort((a, b) => a - b);
    return n % 2 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  }
}

/** The measurements of one tool. */
class ToolTimes {
  readonly step = new Window(STEP_WINDOW);
  /** From the image's start to its first step's end (head plus one step). */
  readonly first = new Window(IMAGE_WINDOW);
  /** From the last step's end to the image's end. */
  readonly tail = new Window(IMAGE_WINDOW);
  /**
   * Per whole image: its steps' mean time, from the first step's end to the
   * last's. Progress reaches this thread in bursts when the main thread is
   * busy (another tenant polling, a flood of requests) or the steps are
   * short, and the intervals between messages then read far shorter than
   * the steps took (a hand-off said "about 10 s" for images that took
   * 17.4 s); the span of a whole image is not skewed by when its messages
   * arrived in between.
   */
  readonly meanStep = new Window(IMAGE_WINDOW);
  /** Steps of the last image measured. */
  steps: number | null = null;
}

/** How many recent jobs the overhead median uses. */
const JOB_WINDOW = 9;

/** Step, head and tail timings of one engine; see the module documentation. */
export class StepTimer {
  readonly #tools = new Map<string, ToolTimes>();
  readonly #all = new ToolTimes();
  /** The warm-up image's head and tail, used only while nothing else is measured. */
  #warmup: { first: number | null; tail: number | null } | null = null;
  #images = 0;
  /**
   * Per job, its time outside its images: claiming it, checking its
   * request, storing its results and previews, ending it. Every job ahead
   * of a queued one costs it too (a queue of three tiny-model jobs took
   * 1.6x what their images alone would).
   */
  readonly #overhead = new Window(JOB_WINDOW);
  #job: { start: number; images: number } | null = null;
  #now: () => number;
  #current:
    | {
      tool: string;
      start: number;
      last: number;
      step: number;
      first: number | null;
      /** When step 1 was reported, and how many steps were reported since, one by one. */
      firstStepAt: number | null;
      counted: number;
    }
    | null = null;

  /** Creates a timer with no measurements; `now` is replaceable in tests. */
  constructor(now: () => number = performance.now.bind(performance)) {
    this.#now = now;
  }

  #times(tool: string): ToolTimes {
    let times = this.#tools.get(tool);
    if (!times) this.#tools.set(tool, times = new ToolTimes());
    return times;
  }

  /** A job was claimed (its time outside its images counts from now). */
  jobStart(): void {
    this.#job = { start: this.#now(), images: 0 };
  }

  /** The claimed job has ended and is stored. */
  jobDone(): void {
    const job = this.#job;
    this.#job = null;
    if (job && this.#images > 1) {
      this.#overhead.add(Math.max(0, this.#now() - job.start - job.images));
    }
  }

  /** An image of `tool` starts. */
  imageStart(tool: string): void {
    const now = this.#now();
    this.#current = {
      tool,
      start: now,
      last: now,
      step: 0,
      first: null,
      firstStepAt: null,
      counted: 0,
    };
  }

  /** Step `step` of `steps` of the current image finished. */
  step(step: number, steps: number): void {
    const c = this.#current;
    if (!c) return;
    const now = this.#now();
    if (step === 1 || c.step === 0) {
      c.first = now - c.start;
      c.firstStepAt = now;
      c.counted = 0;
    } else if (step === c.step + 1) {
      c.counted++;
      const interval = now - c.last;
      this.#times(c.tool).step.add(interval);
      this.#all.step.add(interval);
    }
    c.last = now;
    c.step = step;
    this.#times(c.tool).steps = steps;
    this.#all.steps = steps;
  }

  /** The current image is done (or failed). */
  imageDone(): void {
    const c = this.#current;
    this.#current = null;
    if (!c || c.step === 0) return;
    const tail = this.#now() - c.last;
    if (this.#job) this.#job.images += this.#now() - c.start;
    if (this.#images++ === 0) {
      // The first image of the process runs fresh sessions: kept apart, used only alone.
      this.#warmup = { first: c.first, tail };
      return;
    }
    const times = this.#times(c.tool);
    const mean = c.firstStepAt !== null && c.counted > 0
      ? (c.last - c.firstStepAt) / c.counted
      : null;
    for (const t of [times, this.#all]) {
      if (c.first !== null) t.first.add(c.first);
      t.tail.add(tail);
      if (mean !== null) t.meanStep.add(mean);
    }
  }

  /**
   * Whether a whole image was measured. Before that an estimate covers the
   * steps only (the head of the first image at most), and is a lower bound.
   */
  get measuredImage(): boolean {
    return this.#images > 0;
  }

  /** Median milliseconds per step over every tool, or null before two steps of one image. */
  get stepMs(): number | null {
    return this.#all.step.median();
  }

  /** The timings that apply to `tool`: its own, else every tool's. */
  #parts(tool: string, stepsPerImage: number) {
    const own = this.#tools.get(tool);
    const pick = (w: (t: ToolTimes) => Window) =>
      (own && w(own).size ? w(own).median() : null) ?? w(this.#all).median();
    // A whole image's mean step once one is measured; the intervals before that.
    const step = pick((t) => t.meanStep) ?? pick((t) => t.step);
    if (step === null) return null;
    const first = pick((t) => t.first) ?? this.#warmup?.first ?? step;
    const tail = pick((t) => t.tail) ?? this.#warmup?.tail ?? 0;
    return {
      step,
      head: Math.max(0, first - step),
      tail,
      steps: own?.steps ?? this.#all.steps ?? stepsPerImage,
    };
  }

  /** Estimated milliseconds for `work`, or null before any step was measured. */
  estimateMs(work: WorkLeft): number | null {
    const p = this.#parts(work.tool, work.stepsPerImage);
    if (!p) return null;
    const whole = p.head + p.steps * p.step + p.tail;
    const overhead = this.#overhead.median() ?? 0;
    const current = work.current
      ? work.current.step === 0
        ? whole
        : Math.max(0, work.current.steps - work.current.step) * p.step + p.tail
      : 0;
    return current + work.images * whole + overhead;
  }
}

/** "about 4 min 10 s", "about 35 s", "about 1 h 5 min". */
export function formatDuration(ms: number): string {
  const s = Math.max(1, Math.round(ms / 1000));
  if (s < 60) return `about ${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `about ${m} min${s % 60 ? ` ${s % 60} s` : ""}`;
  return `about ${Math.floor(m / 60)} h${m % 60 ? ` ${m % 60} min` : ""}`;
}
