import { deepStrictEqual, ok, strictEqual } from "node:assert";
import { cpuShareBetween, parseProcStat, type ProcSample, runSampled } from "./proc_sampler.ts";

Deno.test("parseProcStat: utime + stime and rss after a command name with spaces and parentheses", () => {
  // proc(5) fields: pid (comm) state ppid … utime(14) stime(15) … rss(24).
  const fields = Array.from({ length: 50 }, (_, i) => String(i + 1));
  fields[13] = "250"; // utime, ticks
  fields[14] = "50"; // stime
  fields[23] = "1000"; // rss, pages
  const line = `1234 (my (odd) proc) ${fields.slice(2).join(" ")}\n`;
  deepStrictEqual(parseProcStat(line, 100, 4096), { rss: 1000 * 4096, cpuMs: 3000 });
  strictEqual(parseProcStat("garbage", 100, 4096), null);
  strictEqual(parseProcStat("1 (x) S 1 2", 100, 4096), null, "too few fields");
});

Deno.test("cpuShareBetween: CPU time over wall time between the samples around the window", () => {
  const samples: ProcSample[] = [
    { t: 0, rss: 1, cpuMs: 0 },
    { t: 1000, rss: 1, cpuMs: 500 },
    { t: 2000, rss: 1, cpuMs: 2500 },
    { t: 3000, rss: 1, cpuMs: 4500 },
  ];
  strictEqual(cpuShareBetween(samples, 1000, 3000), 2, "two busy cores");
  strictEqual(cpuShareBetween(samples, 500, 1000), 0.5, "from the last sample before");
  strictEqual(cpuShareBetween(samples, 1500, Infinity), 2, "to the process's end");
  strictEqual(cpuShareBetween(samples, -1, 10), null, "no sample before the window");
  strictEqual(cpuShareBetween([], 0, 1), null);
});

Deno.test("runSampled: lines in order with their times, the exit code, a resident size", async () => {
  const r = await runSampled("sh", [
    "-c",
    "printf 'one\\rtwo\\n'; sleep 0.5; echo three >&2; head -c 30000000 /dev/zero | tail -c 1 >/dev/null; exit 3",
  ]);
  strictEqual(r.code, 3);
  deepStrictEqual(r.lines.map((l) => l.text), ["one", "two", "three"]);
  ok(r.lines[2].t - r.lines[0].t >= 400, "the second write came half a second later");
  ok(r.samples.length >= 1 && r.peakRss > 0, "sampled while it ran");
});
