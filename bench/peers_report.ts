/**
 * The peer comparison's arithmetic, apart from the processes it runs (so it is
 * unit-tested): stable-diffusion.cpp's log read into per-step, per-image
 * timings; each runtime's run summarised the same way (seconds per UNet
 * call, per image, peak RSS, CPU share); the ratios project ÷ peer; the
 * table `deno task bench --full --only peers` prints.
 *
 * @module
 */

/** A line of a child's output and when it arrived (ms since the child was spawned). */
export interface TimedLine {
  /** ms since spawn. */
  t: number;
  /** The line, without its line ending. */
  text: string;
}

/** What stable-diffusion.cpp's `sd-cli` log says about one run (times in ms). */
export interface SdcppLog {
  /** "loading tensors completed, taking X s". */
  loadMs: number | null;
  /** "apply_loras completed, taking X s". */
  loraMs: number | null;
  /** "get_learned_condition completed, taking X s": the prompt, once for all images. */
  condMs: number | null;
  /** "sampling completed, taking X s", per image. */
  samplingMs: number[];
  /** Per image, each step's time from the progress line ("i/N - X s/it" or "Y it/s"). */
  stepMs: number[][];
  /** "latent i decoded, taking X s", per image. */
  decodeMs: number[];
  /** Arrival of "generating image: 1/N" (ms since spawn). */
  firstImageAt: number | null;
  /** "generate_image completed in X s". */
  totalMs: number | null;
  /** "(N / M) LoRA tensors have been applied": "N / M". */
  loraTensors: string | null;
}

const seconds = (s: string) => Math.round(Number(s) * 1000 * 100) / 100;

/**
 * Splits a child's output into lines (`\n` and the progress bar's `\r`),
 * dropping ANSI escapes; `t` is given to each line of the chunk.
 */
export function splitLines(chunk: string, t: number, carry: { rest: string }): TimedLine[] {
  const text = carry.rest + chunk;
  const parts = text.split(/\r\n|\r|\n/);
  carry.rest = parts.pop() ?? "";
  // deno-lint-ignore no-control-regex
  return parts.map((p) => ({ t, text: p.replace(/\x1b\[[0-9;]*[A-Za-z]/g, "") }));
}

/** Reads `sd-cli`'s log lines (its INFO lines and progress bars). */
export function parseSdcppLog(lines: readonly TimedLine[]): SdcppLog {
  const log: SdcppLog = {
    loadMs: null,
    loraMs: null,
    condMs: null,
    samplingMs: [],
    stepMs: [],
    decodeMs: [],
    firstImageAt: null,
    totalMs: null,
    loraTensors: null,
  };
  let lastStep = Infinity;
  for (const { t, text } of lines) {
    let m: RegExpExecArray | null;
    if ((m = /loading tensors completed, taking ([\d.]+)s/.exec(text))) log.loadMs = seconds(m[1]);
    else if ((m = /apply_loras completed, taking ([\d.]+)s/.exec(text))) {
      log.loraMs = seconds(m[1]);
    } else if ((m = /get_learned_condition completed, taking ([\d.]+)s/.exec(text))) {
      log.condMs = seconds(m[1]);
    } else if ((m = /\bsampling completed, taking ([\d.]+)s/.exec(text))) {
      log.samplingMs.push(seconds(m[1]));
    } else if ((m = /latent \d+ decoded, taking ([\d.]+)s/.exec(text))) {
      log.decodeMs.push(seconds(m[1]));
    } else if ((m = /generate_image completed in ([\d.]+)s/.exec(text))) {
      log.totalMs = seconds(m[1]);
    } else if ((m = /\((\d+ \/ \d+)\) LoRA tensors have been applied/.exec(text))) {
      log.loraTensors = m[1];
    } else if (/generating image: 1\//.test(text)) log.firstImageAt ??= t;
    else if ((m = /(\d+)\/(\d+) - ([\d.]+)(s\/it|it\/s)/.exec(text))) {
      const step = Number(m[1]);
      const value = Number(m[3]);
      const ms = m[4] === "s/it" ? value * 1000 : 1000 / value;
      // The bar is drawn once per step; a step number that does not grow starts the next image.
      if (step <= lastStep) log.stepMs.push([]);
      log.stepMs.at(-1)!.push(Math.round(ms * 100) / 100);
      lastStep = step;
    }
  }
  return log;
}

/** One runtime's run of one path, summarised alike for every runtime (times in ms). */
export interface SideRun {
  /** "project", "stable-diffusion.cpp" or "diffusers". */
  side: string;
  /** What ran, in a few words (preset, sampler, steps, precision, threads). */
  config: string;
  /** Each UNet call of the steady images (all images but the first when there are more). */
  unetCallMs: number[];
  /** The steady images, end to end. */
  imageMs: number[];
  /** The first image after the models were loaded. */
  firstImageMs: number | null;
  /** From the process's spawn until it was ready for a prompt. */
  startupMs: number | null;
  /** Peak resident memory, bytes, sampled from outside. */
  peakRss: number;
  /** CPU seconds per wall second during the steady images (2 = two busy cores). */
  cpuShare: number | null;
  /** How a figure was taken where the runtimes differ. */
  notes: string[];
  /** Set when the run failed; the figures are then empty. */
  error?: string;
}

/** The median; NaN for none. */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length === 0 ? NaN : s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** The images a summary calls steady: all but the first, or the only one. */
function steady<T>(xs: readonly T[]): T[] {
  return xs.length > 1 ? xs.slice(1) : [...xs];
}

/**
 * A stable-diffusion.cpp run from its log: an image is the prompt's
 * conditioning (computed once per run, counted in every image) + its
 * sampling + its decode; a UNet call is a sampling step (no CFG: one call per
 * step); ready for a prompt when it starts the first image, less the
 * conditioning it computed just before.
 */
export function sdcppSide(
  log: SdcppLog,
  sampled: { peakRss: number; cpuShare: number | null },
  config: string,
): SideRun {
  const cond = log.condMs ?? 0;
  const images = log.samplingMs.map((s, i) => cond + s + (log.decodeMs[i] ?? 0));
  return {
    side: "stable-diffusion.cpp",
    config,
    unetCallMs: steady(log.stepMs).flat(),
    imageMs: steady(images),
    firstImageMs: images[0] ?? null,
    startupMs: log.firstImageAt === null ? null : log.firstImageAt - cond,
    peakRss: sampled.peakRss,
    cpuShare: sampled.cpuShare,
    notes: [
      "UNet call: sd-cli's per-step progress times (one UNet call per step without CFG)",
      "image: conditioning (once per run, counted in each) + sampling + TAESD decode, from sd-cli's log",
      ...(log.loraMs !== null
        ? [
          `LoRA applied at start-up in ${(log.loraMs / 1000).toFixed(1)} s` +
          (log.loraTensors ? ` (${log.loraTensors} tensors)` : ""),
        ]
        : []),
    ],
  };
}

/** One image of the project's server: the call's duration and its progress notifications (ms from the call). */
export interface ProjectImage {
  /** The `tools/call` round trip. */
  ms: number;
  /** When each step's progress notification arrived, ms after the call was sent. */
  progress: number[];
}

/**
 * The project's run: a UNet call is the interval between two consecutive
 * progress notifications (a step: the UNet call and the scheduler's step);
 * with one step there is no interval, and the time from the call to the
 * step's notification (prompt encoding included) stands in, as an upper
 * bound.
 */
export function projectSide(
  run: { startupMs: number; images: ProjectImage[]; peakRss: number; cpuShare: number | null },
  config: string,
): SideRun {
  const calls = steady(run.images).flatMap((im) =>
    im.progress.slice(1).map((t, i) => t - im.progress[i])
  );
  const oneStep = calls.length === 0;
  return {
    side: "project",
    config,
    unetCallMs: oneStep
      ? steady(run.images).map((im) => im.progress[0]).filter((t) => t !== undefined)
      : calls,
    imageMs: steady(run.images).map((im) => im.ms),
    firstImageMs: run.images[0]?.ms ?? null,
    startupMs: run.startupMs,
    peakRss: run.peakRss,
    cpuShare: run.cpuShare,
    notes: [
      oneStep
        ? "UNet call: from the call to its one step's progress notification (prompt encoding included: an upper bound)"
        : "UNet call: the interval between consecutive progress notifications (a step)",
      "image: the generate_image round trip over stdio (PNG and base64 included); start-up: spawn to the tools/list reply",
    ],
  };
}

/** One diffusers image as `peers_diffusers.py` reports it. */
export interface DiffusersImage {
  /** The pipeline call. */
  ms: number;
  /** Each UNet forward. */
  unetMs: number[];
  /** The process's CPU time during the call, all threads. */
  cpuMs: number;
}

/** The diffusers run: the pipeline call per image, each UNet forward timed around the module. */
export function diffusersSide(
  run: { readyAt: number | null; images: DiffusersImage[]; peakRss: number },
  config: string,
): SideRun {
  const st = steady(run.images);
  const wall = st.reduce((a, x) => a + x.ms, 0);
  return {
    side: "diffusers",
    config,
    unetCallMs: st.flatMap((x) => x.unetMs),
    imageMs: st.map((x) => x.ms),
    firstImageMs: run.images[0]?.ms ?? null,
    startupMs: run.readyAt,
    peakRss: run.peakRss,
    cpuShare: wall > 0 ? st.reduce((a, x) => a + x.cpuMs, 0) / wall : null,
    notes: [
      "UNet call: the UNet module's forward, timed around it; image: the pipeline call (PIL image out)",
      "start-up: builds the weights from the seed rather than reading files",
    ],
  };
}

/** Project ÷ peer for the median UNet call, the median image and the peak RSS (null when either lacks it). */
export function ratios(project: SideRun, peer: SideRun) {
  const r = (
    a: number,
    b: number,
  ) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? a / b : null);
  return {
    unetCall: r(median(project.unetCallMs), median(peer.unetCallMs)),
    image: r(median(project.imageMs), median(peer.imageMs)),
    peakRss: r(project.peakRss, peer.peakRss),
  };
}

/** One path of the comparison: the same steps, prompt and size in every runtime. */
export interface PathRun {
  /** "4-step LCM" or "1-step". */
  name: string;
  /** The runtimes' runs, the project first. */
  sides: SideRun[];
}

const s = (ms: number | null) =>
  ms === null || !Number.isFinite(ms) ? "—" : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
const x = (v: number | null) => (v === null ? "—" : `${v.toFixed(2)}×`);

/** The comparison as a Markdown table: one row per runtime and path, the project's ratio to each peer. */
export function peersTable(paths: readonly PathRun[]): string[] {
  const rows = [
    "| path | runtime (what ran) | UNet call | image | first image | start-up | peak RSS | CPU share | project ÷ this: UNet call / image / RSS |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const path of paths) {
    const project = path.sides.find((x) => x.side === "project" && !x.error);
    for (const side of path.sides) {
      if (side.error) {
        rows.push(
          `| ${path.name} | ${side.side} (${side.config}) | not run: ${
            side.error.replaceAll("|", "\\|")
          } | | | | | | |`,
        );
        continue;
      }
      const q = project && side !== project ? ratios(project, side) : null;
      rows.push(
        `| ${path.name} | ${side.side} (${side.config}) | ${s(median(side.unetCallMs))} | ` +
          `${s(median(side.imageMs))} | ${s(side.firstImageMs)} | ${s(side.startupMs)} | ` +
          `${(side.peakRss / 1e9).toFixed(2)} GB | ${
            side.cpuShare === null ? "—" : side.cpuShare.toFixed(2)
          } | ` +
          `${q ? `${x(q.unetCall)} / ${x(q.image)} / ${x(q.peakRss)}` : "—"} |`,
      );
    }
  }
  return rows;
}
