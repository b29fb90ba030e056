import { deepStrictEqual, ok, strictEqual } from "node:assert";
import { formatBytes, formatDuration, ProgressLine } from "./progress.ts";

Deno.test("formatBytes / formatDuration", () => {
  strictEqual(formatBytes(512), "512 B");
  strictEqual(formatBytes(1536), "1.50 KiB");
  strictEqual(formatBytes(3 * 1024 ** 3), "3.00 GiB");
  strictEqual(formatDuration(7), "7s");
  strictEqual(formatDuration(125), "2m05s");
  strictEqual(formatDuration(3723), "1h02m03s");
  strictEqual(formatDuration(Infinity), "?");
});

Deno.test("ProgressLine: redraws with \\r at most every 250 ms", () => {
  let t = 0;
  const out: string[] = [];
  const p = new ProgressLine("[1/1] x", 4 * 1024 ** 2, {
    write: (s) => out.push(s),
    tty: true,
    now: () => t,
  });
  for (const [time, bytes] of [[0, 0], [100, 1], [200, 2], [260, 3], [400, 4], [520, 5]]) {
    t = time;
    p.update(bytes);
  }
  // Draws at t=0, 260 and 520 only.
  strictEqual(out.length, 3);
  ok(out.every((s) => s.startsWith("\r[1/1] x  ") && s.endsWith("\x1b[K")));
  p.finish();
  strictEqual(out.length, 4);
  ok(out[3].endsWith("\n"));
});

Deno.test("ProgressLine: rate and ETA from recent samples", () => {
  let t = 0;
  const out: string[] = [];
  const MiB = 1024 ** 2;
  const p = new ProgressLine("f", 4 * MiB, { write: (s) => out.push(s), tty: true, now: () => t });
  p.update(0);
  t = 1000;
  p.update(1 * MiB); // 1 MiB in 1 s; 3 MiB left → 3 s
  strictEqual(p.rate(), MiB);
  strictEqual(p.text(), "f  1.00 MiB / 4.00 MiB  25.0%  1.00 MiB/s  ETA 3s");
  t = 2000;
  p.update(3 * MiB); // 3 MiB over 2 s = 1.5 MiB/s; 1 MiB left → 0.67 s → "1s"
  strictEqual(p.rate(), 1.5 * MiB);
  ok(p.text().endsWith("1.50 MiB/s  ETA 1s"), p.text());
});

Deno.test("ProgressLine: plain lines when stderr is not a terminal", () => {
  let t = 0;
  const out: string[] = [];
  const p = new ProgressLine("f", 100, { write: (s) => out.push(s), tty: false, now: () => t });
  p.update(10);
  t = 5000;
  p.update(50);
  t = 10_000;
  p.update(90);
  t = 12_000;
  p.update(100);
  p.finish();
  deepStrictEqual(out.map((s) => s.includes("\r")), [false, false]);
  strictEqual(out.length, 2); // t=10000, finish
  ok(out.every((s) => s.endsWith("\n")));
  strictEqual(out[1], "f  100 B / 100 B  100.0%  in 12s  8 B/s\n");
});

Deno.test("ProgressLine: a file done within the interval leaves one line in a log", () => {
  let t = 0;
  const out: string[] = [];
  const p = new ProgressLine("[1/2] hashing a", 4096, {
    write: (s) => out.push(s),
    tty: false,
    now: () => t,
  });
  t = 40;
  p.update(4096);
  p.finish();
  deepStrictEqual(out, ["[1/2] hashing a  4.00 KiB / 4.00 KiB  100.0%  in 0s  100.00 KiB/s\n"]);
});
