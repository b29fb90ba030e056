/**
 * One download progress line on stderr: bytes done/total, percent, rate and
 * ETA, redrawn in place with "\r" at most every 250 ms (~4×/s). When stderr is
 * not a terminal, a plain line is written every 10 s instead, the first one
 * 10 s after the start, and one final line when the file is done — so a file
 * that takes less than 10 s leaves exactly one line, and logs stay readable.
 * This is a terminal display, not a log record, which is why it writes to
 * stderr directly rather than through `log`.
 *
 * @module
 */

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

/** Formats bytes with binary units: 1536 → "1.50 KiB". */
export function formatBytes(n: number): string {
  let v = n;
  let u = 0;
  while (v >= 1024 && u < UNITS.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${n} B` : `${v.toFixed(2)} ${UNITS[u]}`;
}

/** Formats seconds as "1h02m03s" / "2m05s" / "7s"; "?" when unknown. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "?";
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const r = s % 60;
  if (h > 0) return `${h}h${String(m).padStart(2, "0")}m${String(r).padStart(2, "0")}s`;
  if (m > 0) return `${m}m${String(r).padStart(2, "0")}s`;
  return `${r}s`;
}

/** Where and how the line is drawn (injectable for tests). */
export interface ProgressOptions {
  /** Writes raw text; default: stderr. */
  write?: (text: string) => void;
  /** Redraw in place with "\r"; default: whether stderr is a terminal. */
  tty?: boolean;
  /** Clock in ms; default `performance.now`. */
  now?: () => number;
  /** Minimum ms between redraws on a terminal; default 250. */
  intervalMs?: number;
  /** Ms between lines when not a terminal (and before the first); default 10000. */
  plainIntervalMs?: number;
}

const encoder = new TextEncoder();

function stderrWrite(text: string): void {
  try {
    Deno.stderr.writeSync(encoder.encode(text));
  } catch {
    // stderr closed: progress is cosmetic.
  }
}

/** The progress display of one file. */
export class ProgressLine {
  readonly #label: string;
  readonly #total: number;
  readonly #write: (text: string) => void;
  readonly #tty: boolean;
  readonly #now: () => number;
  readonly #interval: number;
  #lastDraw = -Infinity;
  #start: number;
  /** The first update: a resumed download starts with the bytes it already had. */
  #first: { t: number; bytes: number } | undefined;
  #samples: { t: number; bytes: number }[] = [];
  #done = 0;

  /**
   * Creates the display; nothing is drawn until the first {@link update}.
   *
   * @param label shown first, e.g. "[2/8] sd15/unet/weights.pb"
   * @param total expected bytes
   */
  constructor(label: string, total: number, options: ProgressOptions = {}) {
    this.#label = label;
    this.#total = total;
    this.#write = options.write ?? stderrWrite;
    this.#tty = options.tty ?? Deno.stderr.isTerminal();
    this.#now = options.now ?? (() => performance.now());
    this.#interval = this.#tty ? options.intervalMs ?? 250 : options.plainIntervalMs ?? 10_000;
    this.#start = this.#now();
    // A log gets its first line only once the file has taken a whole interval.
    if (!this.#tty) this.#lastDraw = this.#start;
  }

  /** Bytes per second over the last ~5 s of samples (0 when unknown). */
  rate(): number {
    const s = this.#samples;
    if (s.length < 2) return 0;
    const first = s[0];
    const last = s[s.length - 1];
    const dt = (last.t - first.t) / 1000;
    return dt > 0 ? (last.bytes - first.bytes) / dt : 0;
  }

  /** The text of the line for the current state. */
  text(): string {
    const rate = this.rate();
    const pct = this.#total > 0 ? (100 * this.#done) / this.#total : 100;
    const eta = rate > 0 ? formatDuration((this.#total - this.#done) / rate) : "?";
    return `${this.#label}  ${formatBytes(this.#done)} / ${formatBytes(this.#total)}  ` +
      `${pct.toFixed(1)}%  ${formatBytes(Math.round(rate))}/s  ETA ${eta}`;
  }

  /** Records progress (`done` = bytes of the file present so far); redraws if due. */
  update(done: number): void {
    const t = this.#now();
    this.#first ??= { t, bytes: done };
    this.#done = done;
    this.#samples.push({ t, bytes: done });
    while (this.#samples.length > 2 && t - this.#samples[0].t > 5000) this.#samples.shift();
    if (t - this.#lastDraw < this.#interval) return;
    this.#lastDraw = t;
    this.#draw();
  }

  #draw(): void {
    if (this.#tty) {
      // "\x1b[K" clears what a longer previous line left behind.
      this.#write(`\r${this.text()}\x1b[K`);
    } else {
      this.#write(`${this.text()}\n`);
    }
  }

  /**
   * The final line: bytes done, percent, the time taken and the average rate
   * since the first update (bytes a resumed download already had do not
   * count; a single update counts from the start).
   */
  finalText(): string {
    const now = this.#now();
    const pct = this.#total > 0 ? (100 * this.#done) / this.#total : 100;
    let bytes = this.#done;
    let from = this.#start;
    const first = this.#first;
    if (first !== undefined && this.#done > first.bytes) {
      bytes = this.#done - first.bytes;
      from = first.t;
    } else if (first !== undefined && first.t === this.#start) {
      bytes = 0; // resumed with everything already there: nothing was transferred
    }
    const span = (now - from) / 1000;
    const rate = bytes > 0 && span > 0 ? `  ${formatBytes(Math.round(bytes / span))}/s` : "";
    return `${this.#label}  ${formatBytes(this.#done)} / ${formatBytes(this.#total)}  ` +
      `${pct.toFixed(1)}%  in ${formatDuration((now - this.#start) / 1000)}${rate}`;
  }

  /** Ends the display with the final line (in place of the live one on a terminal). */
  finish(): void {
    this.#write(this.#tty ? `\r${this.finalText()}\x1b[K\n` : `${this.finalText()}\n`);
  }
}
