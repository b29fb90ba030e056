/**
 * The "fresh defaults" scenario of `deno task bench --full`: exactly what a
 * fresh clone's `config.toml` plus `deno task models` gives on the CPU
 * provider, with full-size built files standing in for the downloads at the
 * paths `models.lock` pins — the fp16 SD 1.5 set (`buildFullSet`), a
 * full-size random TAESD decoder `.safetensors` and an LCM-shaped LoRA —
 * and the repository's own `[[derived]]` tables. Then, timed: the real
 * `deno task models` (the fp32 set derived from the fp16 one, the TAESD
 * conversion, the LCM LoRA merged into the cache), the real server's first
 * start (`initialize`, `tools/list`, the first image after a cold start),
 * steady images, its peak RSS against the files it opened, and a second
 * start (the merge cached) next to a plain start without any LoRA.
 *
 * With `exportDir` (`--fresh-export DIR`), a diffusers-ONNX folder made by a
 * real exporter (the diffusers script or Optimum) also stands in for the
 * pinned fp32 export at `sd15-fp32/`: `[models] base = "auto"` then picks it
 * on the CPU provider, as it would the pinned files, so the same start-up,
 * image times and peak RSS are measured on that exporter's graphs (the
 * nodes ONNX Runtime plans its memory from), not the project builder's.
 *
 * @module
 */

import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type ConfigEdit, editConfigText } from "../mod/config/mod.ts";
import { Client, StdioClientTransport } from "../mod/mcp/client_sdk.ts";
import {
  buildFullUnet,
  buildHyperSdLora,
  buildTinyLora,
  lcmLoraModules,
  lockEntry,
  lockText,
} from "../tests/fixtures/builder/mod.ts";
import { derivedToml, parseLock, readDerivedRecord } from "../mod/models/mod.ts";
import { randomTaesdWeights, taesdSafetensors } from "../mod/convert/taesd_testing.ts";
import { benchCacheDir, type FullSet } from "./full_models.ts";
import { processAlive } from "../mod/lora/mod.ts";
import { sampleRss } from "./proc_memory.ts";
import { sha256File } from "../mod/bytes/mod.ts";

const REPO = fileURLToPath(new URL("../", import.meta.url));

/** The median of `xs` (the upper one of an even count). */
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const GB = 1e9;

/** The model folders of a diffusers-ONNX export that stand in for the pinned fp32 export's. */
const EXPORT_FOLDERS = ["text_encoder", "unet", "vae_decoder", "vae_encoder"] as const;

/**
 * The files of an export's model folders, as lock paths under `sd15-fp32/`
 * → component: each `model.onnx` with the external data beside it
 * (`weights.pb` from the diffusers script, `model.onnx_data` from Optimum).
 */
function exportFiles(exportDir: string): Map<string, string> {
  const files = new Map<string, string>();
  for (const folder of EXPORT_FOLDERS) {
    for (const e of Deno.readDirSync(join(exportDir, folder))) {
      if (e.isFile) files.set(`sd15-fp32/${folder}/${e.name}`, folder);
    }
  }
  return files;
}

/** The stand-ins for the downloads: lock path → where the built file is (or its bytes). */
function standIns(
  fp16: FullSet,
  seed: number,
  lpb: number,
  exportDir?: string,
): Map<string, string | Uint8Array> {
  const files = new Map<string, string | Uint8Array>();
  for (const f of fp16.files) {
    if (f.path.startsWith("sd15/")) files.set(f.path, join(fp16.root, f.path));
  }
  if (exportDir) {
    for (const path of exportFiles(exportDir).keys()) {
      files.set(path, join(exportDir, path.slice("sd15-fp32/".length)));
    }
    // Tokenizer and scheduler files are the same CLIP and scheduler configs in every export.
    for (const f of fp16.files) {
      if (/^sd15\/(tokenizer|scheduler)\//.test(f.path)) {
        files.set(f.path.replace(/^sd15\//, "sd15-fp32/"), join(fp16.root, f.path));
      }
    }
  }
  files.set("taesd/taesd_decoder.safetensors", taesdSafetensors(randomTaesdWeights(seed)));
  const modules = lcmLoraModules(buildFullUnet(seed, { layersPerBlock: lpb }));
  files.set(
    "lora/lcm-lora-sdv1-5/pytorch_lora_weights.safetensors",
    buildTinyLora(seed, { modules, rank: 64, alpha: 64, scale: 0.001, targets: "unet" }),
  );
  // The turbo preset's LoRA at its pinned path, in Hyper-SD's layout (kohya keys, float32).
  files.set(
    "lora/hyper-sd/Hyper-SD15-1step-lora.safetensors",
    buildHyperSdLora(seed + 1, { modules, rank: 64, scale: 0.001 }),
  );
  return files;
}

/**
 * Lays out the fresh models root: hard links to the built fp16 files (no
 * copy of 2 GB), the TAESD and LoRA stand-ins, and a models.lock of their
 * sizes and hashes plus the repository's `[[derived]]` tables (each `from`
 * extended by the external data files the built models have beside them).
 */
export async function layout(
  fp16: FullSet,
  dir: string,
  seed: number,
  lpb: number,
  reuse: boolean,
  exportDir?: string,
): Promise<string> {
  const root = join(dir, "models");
  const lock = join(dir, "models.lock");
  if (reuse && (await Deno.stat(lock).then(() => true, () => false))) return lock;
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  await Deno.mkdir(root, { recursive: true });
  const byPath = new Map(fp16.files.map((f) => [f.path, f]));
  const entries = [];
  const exported = exportDir ? exportFiles(exportDir) : new Map<string, string>();
  const component = (path: string) =>
    exported.get(path) ?? (path.includes("/tokenizer/") ? "tokenizer" : "scheduler");
  for (const [path, source] of standIns(fp16, seed, lpb, exportDir)) {
    const to = join(root, path);
    await Deno.mkdir(join(to, ".."), { recursive: true });
    if (typeof source === "string" && path.startsWith("sd15-fp32/")) {
      // The export's own files (or the built set's tokenizer), hashed as they are.
      await Deno.link(source, to);
      entries.push({
        component: component(path),
        path,
        url: `fixture://bench/${path}`,
        size: (await Deno.stat(to)).size,
        sha256: await sha256File(to),
      });
    } else if (typeof source === "string") {
      await Deno.link(source, to);
      const f = byPath.get(path)!;
      entries.push({
        component: f.component,
        path,
        url: `fixture://bench/${path}`,
        size: f.size,
        sha256: f.sha256,
      });
    } else {
      await Deno.writeFile(to, source);
      const e = lockEntry(path.startsWith("lora/") ? "lora" : "vae_decoder", path, source);
      entries.push({ ...e, url: `fixture://bench/${path}` });
    }
  }
  // The shipped tables alone: a developer's models.local.lock is no part of a fresh clone.
  const shipped = parseLock(await Deno.readTextFile(join(REPO, "models.lock")));
  const derived = shipped.derived.map((d) => {
    const extra = d.from.flatMap((p) => {
      const folder = p.slice(0, p.lastIndexOf("/") + 1);
      return [...byPath.keys()].filter((q) =>
        q.startsWith(folder) && !q.slice(folder.length).includes("/") && q.endsWith("_data")
      );
    });
    return derivedToml({ ...d, from: [...d.from, ...extra.filter((q) => !d.from.includes(q))] });
  });
  await Deno.writeTextFile(
    lock,
    lockText(entries as Parameters<typeof lockText>[0]) + "\n" + derived.join("\n"),
  );
  return lock;
}

/** The repository's config.toml with the models root, lock and data folder moved (and `edits`). */
export async function freshConfig(
  dir: string,
  lock: string,
  name: string,
  edits: ConfigEdit[] = [],
): Promise<string> {
  const text = editConfigText(await Deno.readTextFile(join(REPO, "config.toml")), [
    { section: "models", key: "root", value: JSON.stringify(join(dir, "models")) },
    { section: "models", key: "lock", value: JSON.stringify(lock) },
    { section: "server", key: "data_dir", value: JSON.stringify(join(dir, "data")) },
    // The call waits for its image however long it takes (no job hand-off to time instead).
    { section: "generation", key: "max_wait_seconds", value: "0" },
    ...edits,
  ]);
  const path = join(dir, name);
  await Deno.writeTextFile(path, text);
  return path;
}

/** Runs `deno task models` on `config`: ms, exit code, peak RSS, the last lines of stderr. */
export async function runModels(config: string) {
  const t0 = performance.now();
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-P=models", "--quiet", "mod/models/cli.ts", "--config", config],
    cwd: REPO,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const rss = sampleRss(child.pid);
  const out = await child.output();
  const peak = await rss.stop();
  return {
    ms: Math.round(performance.now() - t0),
    code: out.code,
    peakRss: peak,
    log: new TextDecoder().decode(out.stderr).trim().split("\n").slice(-8),
  };
}

/** The real server (`main.ts`, stdio) on `config`, an SDK client for it and its stderr so far. */
export function spawnServer(config: string, name = "bench") {
  const transport = new StdioClientTransport({
    command: Deno.execPath(),
    args: ["run", "-P=serve", "--quiet", "main.ts", "--config", config],
    cwd: REPO,
    // As `deno task serve` starts it (deno.json): glibc backs ONNX Runtime's tensors with huge pages.
    env: {
      ...Deno.env.toObject(),
      NO_COLOR: "1",
      GLIBC_TUNABLES: `${Deno.env.get("GLIBC_TUNABLES") ?? ""}:glibc.malloc.hugetlb=1`,
    },
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (c: Uint8Array) => stderr += new TextDecoder().decode(c));
  return { transport, client: new Client({ name, version: "1" }), stderr: () => stderr };
}

/**
 * What a server's log says about its start: the intra-op threads its sessions
 * got, each model's optimised graph taken from the cache or built (and what
 * that cost), and the warm-up run's time.
 */
export function startFacts(stderr: string): {
  intraOpThreads?: number;
  optimizedCache: { hits: number; hitMs: number; built: number; builtMs: number; bytes: number };
  warmUpMs?: number;
} {
  const facts = {
    intraOpThreads: undefined as number | undefined,
    optimizedCache: { hits: 0, hitMs: 0, built: 0, builtMs: 0, bytes: 0 },
    warmUpMs: undefined as number | undefined,
  };
  for (const line of stderr.split("\n")) {
    const brace = line.indexOf(" {");
    let fields: Record<string, unknown> = {};
    try {
      if (brace >= 0) fields = JSON.parse(line.slice(brace + 1));
    } catch {
      continue;
    }
    const n = (k: string) => (typeof fields[k] === "number" ? fields[k] as number : 0);
    if (line.includes("ONNX Runtime sessions compute on")) {
      facts.intraOpThreads = n("intraOpThreads");
    } else if (line.includes("opened its optimised graph from the cache")) {
      facts.optimizedCache.hits++;
      facts.optimizedCache.hitMs += n("ms");
    } else if (line.includes("optimised and kept its graph")) {
      facts.optimizedCache.built++;
      facts.optimizedCache.builtMs += n("ms");
      facts.optimizedCache.bytes += n("bytes");
    } else if (line.includes("warmed up")) {
      facts.warmUpMs = (facts.warmUpMs ?? 0) + n("ms");
    }
  }
  return facts;
}

/** One real server run: initialize, tools/list, `images` images; times from spawn, peak RSS. */
async function serve(config: string, images: number) {
  const t0 = performance.now();
  const { transport, client, stderr } = spawnServer(config, "bench-fresh");
  await client.connect(transport);
  const rss = sampleRss(transport.pid!);
  const initializeMs = performance.now() - t0;
  const imageMs: number[] = [];
  let toolsListMs = NaN;
  let firstImageMs = NaN;
  let error: string | undefined;
  try {
    await client.listTools(undefined, { timeout: 1_800_000 });
    toolsListMs = performance.now() - t0;
    for (let i = 0; i < images; i++) {
      const s = performance.now();
      const r = await client.callTool(
        {
          name: "generate_image",
          arguments: { positive_prompt: "a lighthouse", size: "square_512" },
        },
        undefined,
        { timeout: 1_800_000 },
      );
      const image = (r.content as Array<{ type: string }>).some((c) => c.type === "image");
      if (r.isError || !image) error = JSON.stringify(r.content).slice(0, 300);
      imageMs.push(performance.now() - s);
      if (i === 0) firstImageMs = performance.now() - t0;
    }
  } catch (e) {
    error = (e as Error).message;
  } finally {
    const pid = transport.pid;
    await client.close();
    // The next run must not overlap this one (CPU and RSS are per run).
    // Up to [server] shutdown_grace_seconds (120) and a margin.
    const until = Date.now() + 150_000;
    while (pid && Date.now() < until && await processAlive(pid)) {
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  return {
    initializeMs: Math.round(initializeMs),
    toolsListMs: Math.round(toolsListMs),
    firstImageMs: Math.round(firstImageMs),
    imageMs: imageMs.map(Math.round),
    // The first image's own time over the steady images' median (the user's first wait).
    firstOverSteady: imageMs.length > 1
      ? Number((imageMs[0] / median(imageMs.slice(1))).toFixed(2))
      : undefined,
    start: startFacts(stderr()),
    peakRss: await rss.stop(),
    ...(error ? { error, stderr: stderr().slice(-800) } : {}),
  };
}

/**
 * Bytes of what the fast preset's server opens: the base set's text encoder
 * and VAE encoder (image-to-image and upscaling), the merged UNet, TAESD.
 * The derived set's folders are counted from their records; the export's
 * (`sd15-fp32/`, `--fresh-export`) from the files themselves.
 */
async function openedBytes(root: string, exported: boolean): Promise<number> {
  let n = 0;
  if (exported) {
    for (const folder of ["text_encoder", "vae_encoder"]) {
      for await (const e of Deno.readDir(join(root, "sd15-fp32", folder))) {
        if (e.isFile) n += (await Deno.stat(join(root, "sd15-fp32", folder, e.name))).size;
      }
    }
  }
  const folders = [
    ...(exported ? [] : [
      join(root, "sd15-fp32-derived/text_encoder"),
      join(root, "sd15-fp32-derived/vae_encoder"),
    ]),
    join(root, "taesd/vae_decoder"),
  ];
  // The merge cache keeps the previous merge beside the current one: the newest is this run's.
  let newest: { path: string; builtAt: string } | undefined;
  for await (const e of Deno.readDir(join(root, ".merged"))) {
    if (e.isDirectory && e.name.startsWith("unet-") && !e.name.includes(".building-")) {
      const path = join(root, ".merged", e.name);
      const builtAt = (await readDerivedRecord(path))?.builtAt ?? "";
      if (!newest || builtAt > newest.builtAt) newest = { path, builtAt };
    }
  }
  if (newest) folders.push(newest.path);
  for (const f of folders) {
    const record = await readDerivedRecord(f);
    n += (record?.files ?? []).reduce((a, x) => a + x.size, 0);
  }
  return n;
}

/** Runs the scenario on the built fp16 set; returns its report and table rows. */
export async function runFreshDefaults(
  fp16: FullSet,
  options: {
    seed?: number;
    images?: number;
    layersPerBlock?: number;
    reuse?: boolean;
    /** A diffusers-ONNX folder standing in for the pinned fp32 export (`--fresh-export`). */
    exportDir?: string;
  } = {},
): Promise<{ report: Record<string, unknown>; rows: string[][] }> {
  const exportDir = options.exportDir;
  const dir = join(benchCacheDir(), exportDir ? "fresh-defaults-export" : "fresh-defaults");
  const lock = await layout(
    fp16,
    dir,
    options.seed ?? 1234,
    options.layersPerBlock ?? 2,
    options.reuse ?? false,
    exportDir,
  );
  const config = await freshConfig(dir, lock, "config.toml");
  const models = await runModels(config);
  if (models.code !== 0) {
    return {
      report: { models },
      rows: [[
        "fresh defaults",
        `deno task models failed (exit ${models.code}): ${models.log.join(" | ")}`,
      ]],
    };
  }
  const first = await serve(config, options.images ?? 3);
  const second = await serve(config, 1);
  // The plain start: the same sampling without any LoRA, so nothing to merge or take from a cache.
  const plainConfig = await freshConfig(dir, lock, "plain.toml", [
    { section: "generation", key: "preset", value: '"custom"' },
    { section: "generation", key: "steps", value: "4" },
    { section: "generation", key: "guidance_scale", value: "1.0" },
    { section: "generation", key: "scheduler", value: '"lcm"' },
    { section: "models", key: "vae_decoder", value: '"tiny"' },
  ]);
  const plain = await serve(plainConfig, 1);
  const files = await openedBytes(join(dir, "models"), exportDir !== undefined);
  const steady = first.imageMs.slice(1);
  const report = {
    root: dir,
    reusedLayout: options.reuse ?? false,
    ...(exportDir ? { exportDir } : {}),
    models,
    firstStart: { ...first, filesOpened: files },
    secondStart: second,
    plainStart: plain,
  };
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const rows = [[
    exportDir
      ? `fresh defaults on the export in ${exportDir} (config.toml + deno task models, CPU: fast preset, the export as the fp32 set, TAESD, LCM LoRA cached)`
      : "fresh defaults (config.toml + deno task models, CPU: fast preset, derived fp32 set, TAESD, LCM LoRA cached)",
    `deno task models ${s(models.ms)} (peak RSS ${(models.peakRss / GB).toFixed(2)} GB)`,
    `first start: initialize ${s(first.initializeMs)}, tools/list ${s(first.toolsListMs)}, ` +
    `first image ${s(first.firstImageMs)} after the start`,
    `first image ${s(first.imageMs[0] ?? NaN)} = ${first.firstOverSteady ?? "n/a"}× the steady ` +
    `image ${steady.length ? s(median(steady)) : "n/a"} (${steady.map(s).join(", ")}); ` +
    `${first.start.intraOpThreads ?? "?"} intra-op threads`,
    `first start: ${first.start.optimizedCache.built} optimised graphs written ` +
    `(${s(first.start.optimizedCache.builtMs)}, ${
      (first.start.optimizedCache.bytes / GB).toFixed(2)
    } GB), ${first.start.optimizedCache.hits} read; warm-up ${
      first.start.warmUpMs === undefined ? "none" : s(first.start.warmUpMs)
    }`,
    `second start: ${second.start.optimizedCache.hits} optimised graphs read (${
      s(second.start.optimizedCache.hitMs)
    }), ${second.start.optimizedCache.built} written; warm-up ${
      second.start.warmUpMs === undefined ? "none" : s(second.start.warmUpMs)
    }; first image ${s(second.imageMs[0] ?? NaN)} = ${
      steady.length ? (second.imageMs[0] / median(steady)).toFixed(2) : "n/a"
    }× the first start's steady image`,
    `peak RSS ${(first.peakRss / GB).toFixed(2)} GB = ${
      (first.peakRss / files).toFixed(2)
    }× files opened (${(files / GB).toFixed(2)} GB)`,
    `second start tools/list ${s(second.toolsListMs)} vs plain start (no LoRA) ${
      s(plain.toolsListMs)
    }`,
    ...(first.error ? [`error: ${first.error}`] : []),
  ]];
  return { report, rows };
}
