import { deepStrictEqual, ok, strictEqual } from "node:assert";
import {
  diffusersSide,
  median,
  parseSdcppLog,
  peersTable,
  projectSide,
  ratios,
  sdcppSide,
  splitLines,
  type TimedLine,
} from "./peers_report.ts";

/** sd-cli's output for two 2-step images (its log format: `[LEVEL] file:line - message`; the bar redrawn with `\r`). */
const SDCPP_OUTPUT = [
  "[INFO ] stable-diffusion.cpp:798  - loading tae from 'taesd.safetensors'\n",
  "[INFO ] model_loader.cpp:1304 - loading tensors completed, taking 7.41s (read: 5.10s, memcpy: 0.00s, convert: 0.00s, copy_to_backend: 0.00s)\n",
  "[INFO ] lora.hpp:997  - (834 / 834) LoRA tensors have been applied, lora_file_path = lora.safetensors\n",
  "[INFO ] stable-diffusion.cpp:2135 - apply_loras completed, taking 3.21s\n",
  "[INFO ] stable-diffusion.cpp:5296 - get_learned_condition completed, taking 0.21s\n",
  "[INFO ] stable-diffusion.cpp:5667 - generating image: 1/2 - seed 42\n",
  "\r  |=========================>                        | 1/2 - 6.52s/it\x1b[K",
  "\r  |==================================================| 2/2 - 4.10s/it\x1b[K\n",
  "[INFO ] stable-diffusion.cpp:5711 - sampling completed, taking 10.63s\n",
  "[INFO ] stable-diffusion.cpp:5667 - generating image: 2/2 - seed 43\n",
  "\r  |=========================>                        | 1/2 - 4.00s/it\x1b[K",
  "\r  |==================================================| 2/2 - 4.20s/it\x1b[K\n",
  "[INFO ] stable-diffusion.cpp:5711 - sampling completed, taking 8.21s\n",
  "[INFO ] stable-diffusion.cpp:5723 - generating 2 latent images completed, taking 18.85s\n",
  "[INFO ] stable-diffusion.cpp:5387 - latent 1 decoded, taking 0.90s\n",
  "[INFO ] stable-diffusion.cpp:5387 - latent 2 decoded, taking 0.70s\n",
  "[INFO ] stable-diffusion.cpp:5391 - decode_first_stage completed, taking 1.60s\n",
  "[INFO ] stable-diffusion.cpp:5861 - generate_image completed in 31.00s\n",
];

function timedLines(chunks: string[]): TimedLine[] {
  const carry = { rest: "" };
  return chunks.flatMap((c, i) => splitLines(c, 1000 * i, carry));
}

Deno.test("splitLines: \\n and \\r end lines, ANSI escapes go, a partial line waits for its end", () => {
  const carry = { rest: "" };
  deepStrictEqual(splitLines("a\rb\x1b[K\nc", 5, carry), [{ t: 5, text: "a" }, {
    t: 5,
    text: "b",
  }]);
  strictEqual(carry.rest, "c");
  deepStrictEqual(splitLines("d\r\n", 7, carry), [{ t: 7, text: "cd" }]);
});

Deno.test("parseSdcppLog: per-image steps, sampling, decodes and the start of the first image", () => {
  const log = parseSdcppLog(timedLines(SDCPP_OUTPUT));
  deepStrictEqual(log, {
    loadMs: 7410,
    loraMs: 3210,
    condMs: 210,
    samplingMs: [10630, 8210],
    stepMs: [[6520, 4100], [4000, 4200]],
    decodeMs: [900, 700],
    firstImageAt: 5000,
    totalMs: 31000,
    loraTensors: "834 / 834",
  });
  deepStrictEqual(
    parseSdcppLog([{ t: 0, text: "  | 1/1 - 2.50it/s" }, { t: 1, text: "  | 1/1 - 1.25s/it" }])
      .stepMs,
    [[400], [1250]],
    "one-step images: each bar is the next image; it/s is inverted",
  );
});

Deno.test("sdcppSide: steady images are the second on; an image is conditioning + sampling + decode", () => {
  const side = sdcppSide(parseSdcppLog(timedLines(SDCPP_OUTPUT)), {
    peakRss: 5e9,
    cpuShare: 1.9,
  }, "lcm");
  deepStrictEqual(side.unetCallMs, [4000, 4200]);
  deepStrictEqual(side.imageMs, [210 + 8210 + 700]);
  strictEqual(side.firstImageMs, 210 + 10630 + 900);
  strictEqual(
    side.startupMs,
    5000 - 210,
    "ready when it began the first image, less the conditioning",
  );
  ok(
    side.notes.some((n) => n.includes("3.2 s (834 / 834 tensors)")),
    "the LoRA's application is noted",
  );
});

Deno.test("projectSide: UNet calls between progress notifications; one step falls back to the first", () => {
  const images = [
    { ms: 30_000, progress: [9000, 15_000, 21_000, 27_000] },
    { ms: 20_000, progress: [4200, 8300, 12_300, 16_400] },
    { ms: 21_000, progress: [4300, 8400, 12_600, 16_800] },
  ];
  const side = projectSide({ startupMs: 13_000, images, peakRss: 6e9, cpuShare: 1.95 }, "fast");
  deepStrictEqual(side.unetCallMs, [4100, 4000, 4100, 4100, 4200, 4200]);
  deepStrictEqual(side.imageMs, [20_000, 21_000]);
  strictEqual(side.firstImageMs, 30_000);
  const one = projectSide({
    startupMs: 1,
    images: [{ ms: 9000, progress: [7000] }, { ms: 6000, progress: [4500] }],
    peakRss: 1,
    cpuShare: null,
  }, "1 step");
  deepStrictEqual(one.unetCallMs, [4500]);
  ok(one.notes[0].includes("upper bound"));
});

Deno.test("diffusersSide and ratios: medians of the steady images, project ÷ peer", () => {
  const side = diffusersSide({
    readyAt: 50_000,
    images: [
      { ms: 40_000, unetMs: [9000, 8000, 8000, 8000], cpuMs: 60_000 },
      { ms: 30_000, unetMs: [7000, 7000, 7000, 7000], cpuMs: 57_000 },
      { ms: 32_000, unetMs: [7500, 7500, 7500, 7500], cpuMs: 63_000 },
    ],
    peakRss: 8e9,
  }, "lcm");
  strictEqual(median(side.unetCallMs), 7250);
  strictEqual(side.cpuShare, 120_000 / 62_000);
  const project = projectSide({
    startupMs: 1,
    images: [{ ms: 1, progress: [0, 1] }, { ms: 15_500, progress: [0, 3625, 7250] }],
    peakRss: 6e9,
    cpuShare: 2,
  }, "fast");
  deepStrictEqual(ratios(project, side), { unetCall: 0.5, image: 0.5, peakRss: 0.75 });
  strictEqual(median([]), NaN);
});

Deno.test("peersTable: a row per runtime, the ratio on the peers' rows, a failed run says why", () => {
  const project = projectSide({
    startupMs: 12_000,
    images: [{ ms: 1, progress: [0, 1] }, { ms: 20_000, progress: [0, 4000] }],
    peakRss: 5.5e9,
    cpuShare: 1.9,
  }, "fast preset");
  const peer = {
    ...project,
    side: "diffusers",
    config: "lcm",
    unetCallMs: [8000],
    imageMs: [40_000],
  };
  const rows = peersTable([{
    name: "4-step LCM",
    sides: [project, peer, { ...peer, side: "stable-diffusion.cpp", error: "exit 1 | oops" }],
  }]);
  strictEqual(rows.length, 5);
  ok(rows[2].startsWith("| 4-step LCM | project (fast preset) | 4.00 s | 20.0 s |"), rows[2]);
  ok(rows[3].includes("| 0.50× / 0.50× / 1.00× |"), rows[3]);
  ok(rows[4].includes("not run: exit 1 \\| oops"), rows[4]);
});
