import { deepStrictEqual, notStrictEqual, ok, strictEqual } from "node:assert";
import { join } from "node:path";
import { buildUnet, TINY_DIMS } from "../../tests/fixtures/builder/mod.ts";
import { buildSd15TextEncoder, OPSET, Rng } from "../graph/mod.ts";
import { TEST_TEXT_ENCODER } from "../convert/sd15_testing.ts";
import { readModelInfo } from "./model_info.ts";
import {
  type CacheOutcome,
  type CacheRuntime,
  cpuIdentity,
  misplacedPrepacked,
  openCachedRewrite,
  openThroughCache,
  OPTIMIZED_DATA,
  OPTIMIZED_MODEL,
  OPTIMIZED_RECORD,
  type OptimizedRecord,
  PREPACKED_ALIGNMENT,
} from "./optimized_cache.ts";
import {
  createSession,
  createSessionFromBytes,
  type Session,
  type SessionOptions,
  Tensor,
} from "./runtime.ts";
import { toFloat32 } from "./tensors.ts";
import { tinyUnetFeeds } from "./testing.ts";

const unet = buildUnet(11, TINY_DIMS, { flavour: "diffusers", io: "float32" });

const feeds = tinyUnetFeeds;

async function outputOf(session: Session): Promise<Float32Array> {
  return toFloat32((await session.run(feeds())).out_sample);
}

/** A model folder (graph + weights.pb) and an empty cache folder in a temp dir. */
async function setup(): Promise<{ dir: string; model: string; cache: string }> {
  const dir = await Deno.makeTempDir({ prefix: "optimized_cache_" });
  await Deno.mkdir(join(dir, "unet"));
  await Deno.writeFile(join(dir, "unet", "model.onnx"), unet.model);
  await Deno.writeFile(join(dir, "unet", "weights.pb"), unet.external!.data);
  return { dir, model: join(dir, "unet", "model.onnx"), cache: join(dir, "cache") };
}

/** The real runtime without the cache, recording what it was asked to open. */
function recordingRuntime(): CacheRuntime<Session> & {
  calls: Array<{ path: string; o: SessionOptions }>;
} {
  const calls: Array<{ path: string; o: SessionOptions }> = [];
  return {
    calls,
    version: "test-runtime 1",
    open: (path, o) => {
      calls.push({ path, o });
      return createSession(path, { ...o, optimizedCache: undefined });
    },
    openBytes: (bytes, externalData, o) => {
      calls.push({ path: "(bytes)", o });
      return createSessionFromBytes(bytes, externalData, { ...o, optimizedCache: undefined });
    },
    release: (session) => session.release(),
  };
}

const OPTIONS: SessionOptions = { intraOpThreads: 1, label: "unet" };

async function open(
  model: string,
  cache: string,
  runtime: CacheRuntime<Session>,
  extra: SessionOptions = {},
): Promise<{ session: Session; outcome: CacheOutcome }> {
  let outcome: CacheOutcome | undefined;
  const session = await openThroughCache(
    { path: model },
    { ...OPTIONS, ...extra, optimizedCache: cache },
    runtime,
    (o) => outcome = o,
  );
  return { session, outcome: outcome! };
}

async function folders(cache: string): Promise<string[]> {
  const names: string[] = [];
  for await (const e of Deno.readDir(cache)) if (e.isDirectory) names.push(e.name);
  return names.sort();
}

Deno.test("optimised-graph cache: the first open writes it, the next opens it unoptimised, same numbers", async () => {
  const { dir, model, cache } = await setup();
  try {
    const plain = await createSession(model, OPTIONS);
    const expected = await outputOf(plain);
    await plain.release();

    const runtime = recordingRuntime();
    const first = await open(model, cache, runtime);
    strictEqual(first.outcome.state, "built");
    const save = runtime.calls[0].o.saveOptimized!;
    strictEqual(runtime.calls[0].path, model, "the first start optimises the model itself");
    strictEqual(runtime.calls[0].o.graphOptimization, undefined, "at the configured level");
    strictEqual(save.externalData, OPTIMIZED_DATA);
    strictEqual(save.prepacked, true, "CPU: the pre-packed weights are kept too");
    deepStrictEqual(await outputOf(first.session), expected);
    await first.session.release();

    const [folder] = await folders(cache);
    ok(/^unet-[0-9a-f]{8}-[0-9a-f]{16}$/.test(folder), folder);
    const names = [...Deno.readDirSync(join(cache, folder))].map((e) => e.name).sort();
    deepStrictEqual(names, [OPTIMIZED_MODEL, OPTIMIZED_DATA, OPTIMIZED_RECORD].sort());
    const record = JSON.parse(
      await Deno.readTextFile(join(cache, folder, OPTIMIZED_RECORD)),
    ) as OptimizedRecord;
    strictEqual(record.source, await Deno.realPath(model));
    deepStrictEqual(record.key.sources.map((s) => [s.name, s.size]), [
      ["model.onnx", unet.model.length],
      ["weights.pb", unet.external!.data.length],
    ]);
    strictEqual(record.key.graphOptimization, "all");

    // The UNet's pre-packed weights are kept: ONNX Runtime wrote each on a 64-byte boundary.
    strictEqual(first.outcome.state === "built" && first.outcome.prepacked, true);
    strictEqual(record.withoutPrepacked, undefined);
    const blobs = (await readModelInfo(join(cache, folder, OPTIMIZED_MODEL))).prepacked;
    ok(blobs.length > 0, "the data file holds pre-packed weights");
    strictEqual(await misplacedPrepacked(join(cache, folder, OPTIMIZED_MODEL)), null);

    const second = await open(model, cache, runtime);
    strictEqual(second.outcome.state, "hit");
    strictEqual(runtime.calls[1].path, join(cache, folder, OPTIMIZED_MODEL));
    strictEqual(runtime.calls[1].o.graphOptimization, "disabled", "nothing optimised again");
    strictEqual(runtime.calls[1].o.saveOptimized, undefined);
    deepStrictEqual(await outputOf(second.session), expected);
    await second.session.release();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("optimised-graph cache: createSession with optimizedCache goes through it", async () => {
  const { dir, model, cache } = await setup();
  try {
    const a = await createSession(model, { ...OPTIONS, optimizedCache: cache });
    const b = await createSession(model, { ...OPTIONS, optimizedCache: cache });
    deepStrictEqual(await outputOf(b), await outputOf(a));
    await a.release();
    await b.release();
    strictEqual((await folders(cache)).length, 1);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("optimised-graph cache: changed weights are a new key; one older folder stays per model", async () => {
  const { dir, model, cache } = await setup();
  try {
    const runtime = recordingRuntime();
    const weights = join(dir, "unet", "weights.pb");
    const keys: string[] = [];
    for (let round = 0; round < 3; round++) {
      if (round > 0) {
        // Same size, other bytes (the mtime moves with the write).
        const data = unet.external!.data.slice();
        data[round] ^= 0x40;
        await Deno.writeFile(weights, data);
        await Deno.utime(weights, new Date(), new Date(Date.now() + round * 1000));
      }
      const { session, outcome } = await open(model, cache, runtime);
      strictEqual(outcome.state, "built", `round ${round}`);
      keys.push((outcome as { folder: string }).folder);
      await session.release();
    }
    strictEqual(new Set(keys).size, 3, "a new folder for every content");
    deepStrictEqual(
      await folders(cache),
      keys.slice(1).map((k) => k.slice(cache.length + 1)).sort(),
      "the current one and the most recent other",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("optimised-graph cache: a cached graph that does not open is rebuilt, with a log line", async () => {
  const { dir, model, cache } = await setup();
  try {
    const runtime = recordingRuntime();
    const first = await open(model, cache, runtime);
    const expected = await outputOf(first.session);
    await first.session.release();
    const folder = (first.outcome as { folder: string }).folder;
    // Garbage of the same size and mtime: the record's check passes, ONNX Runtime does not.
    const path = join(folder, OPTIMIZED_MODEL);
    const stat = await Deno.stat(path);
    await Deno.writeFile(path, new Uint8Array(stat.size).fill(0xff));
    await Deno.utime(path, stat.atime!, stat.mtime!);

    const again = await open(model, cache, runtime);
    strictEqual(again.outcome.state, "built");
    deepStrictEqual(await outputOf(again.session), expected);
    await again.session.release();
    const third = await open(model, cache, runtime);
    strictEqual(third.outcome.state, "hit", "the rebuilt graph is in place");
    await third.session.release();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("optimised-graph cache: a changed file or another recorded key is stale", async () => {
  const { dir, model, cache } = await setup();
  try {
    const runtime = recordingRuntime();
    const first = await open(model, cache, runtime);
    await first.session.release();
    const folder = (first.outcome as { folder: string }).folder;
    // A data file that grew: its size no longer matches the record.
    const data = join(folder, OPTIMIZED_DATA);
    await Deno.writeFile(data, new Uint8Array(8), { append: true });
    const second = await open(model, cache, runtime);
    strictEqual(second.outcome.state, "built");
    await second.session.release();
    // A record written for another key (an older cache version) is not trusted either.
    const recordPath = join(folder, OPTIMIZED_RECORD);
    const record = JSON.parse(await Deno.readTextFile(recordPath)) as OptimizedRecord;
    record.key.format = 0;
    await Deno.writeTextFile(recordPath, JSON.stringify(record));
    const third = await open(model, cache, runtime);
    strictEqual(third.outcome.state, "built");
    await third.session.release();
    const kept = JSON.parse(await Deno.readTextFile(recordPath)) as OptimizedRecord;
    notStrictEqual(kept.key.format, 0);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("optimised-graph cache: written beside its final name and moved there complete; dead writers' folders swept", async () => {
  const { dir, model, cache } = await setup();
  try {
    await Deno.mkdir(cache, { recursive: true });
    // Left by a process that died mid-write (pid 2^22 + 1 is above Linux's pid_max default).
    const dead = join(cache, `unet-00000000-0000000000000000.building-${2 ** 22 + 1}-x1`);
    await Deno.mkdir(dead);
    await Deno.writeFile(join(dead, OPTIMIZED_MODEL), new Uint8Array(10));
    // One of a live process (this one) is left alone.
    const live = join(cache, `unet-00000000-0000000000000000.building-${Deno.pid}-x2`);
    await Deno.mkdir(live);
    const seen: string[][] = [];
    const runtime = recordingRuntime();
    const watching: CacheRuntime<Session> = {
      version: runtime.version,
      openBytes: runtime.openBytes,
      release: runtime.release,
      open: async (path, o) => {
        const session = await runtime.open(path, o);
        if (o.saveOptimized) {
          // ONNX Runtime has written the graph: no final folder yet, no record in the scratch one.
          const scratch = o.saveOptimized.path.slice(0, o.saveOptimized.path.lastIndexOf("/"));
          seen.push(await folders(cache));
          strictEqual(await Deno.stat(join(scratch, OPTIMIZED_RECORD)).catch(() => null), null);
        }
        return session;
      },
    };
    const { session, outcome } = await open(model, cache, watching);
    await session.release();
    strictEqual(seen.length, 1);
    ok(seen[0].every((name) => name.includes(".building-")), `only scratch folders: ${seen[0]}`);
    const final = (outcome as { folder: string }).folder.slice(cache.length + 1);
    deepStrictEqual(await folders(cache), [final, live.slice(cache.length + 1)].sort());
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("optimised-graph cache: a folder whose model is gone is swept", async () => {
  const { dir, model, cache } = await setup();
  try {
    const runtime = recordingRuntime();
    // A second model (another path) cached, then deleted.
    await Deno.mkdir(join(dir, "other"));
    const other = join(dir, "other", "model.onnx");
    await Deno.copyFile(model, other);
    await Deno.copyFile(join(dir, "unet", "weights.pb"), join(dir, "other", "weights.pb"));
    const a = await open(other, cache, runtime, { label: "text_encoder" });
    await a.session.release();
    await Deno.remove(join(dir, "other"), { recursive: true });
    const b = await open(model, cache, runtime);
    await b.session.release();
    deepStrictEqual(await folders(cache), [
      (b.outcome as { folder: string }).folder.slice(cache.length + 1),
    ]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("optimised-graph cache: bypassed when it cannot be written or nothing is optimised", async () => {
  const { dir, model } = await setup();
  try {
    const runtime = recordingRuntime();
    // A file where the cache folder should be: nothing can be written under it.
    const blocked = join(dir, "blocked");
    await Deno.writeTextFile(blocked, "");
    const a = await open(model, join(blocked, "cache"), runtime);
    strictEqual(a.outcome.state, "bypassed");
    strictEqual(runtime.calls.at(-1)!.o.saveOptimized, undefined);
    strictEqual((await outputOf(a.session)).length, 4 * 8 * 8, "the model still opens");
    await a.session.release();
    const b = await open(model, join(dir, "cache"), runtime, { graphOptimization: "disabled" });
    deepStrictEqual(b.outcome, { state: "bypassed", why: "graph optimisation is disabled" });
    await b.session.release();
    strictEqual(await Deno.stat(join(dir, "cache")).catch(() => null), null, "nothing written");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cpuIdentity: vendor, family, model and flags decide it; unreadable is null", () => {
  const x86 = (flags: string, model = "2") =>
    `processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: ${model}\n` +
    `model name\t: AMD EPYC\ncpu MHz\t\t: 2095.992\nflags\t\t: ${flags}\n\nprocessor\t: 1\n`;
  const a = cpuIdentity(x86("fpu sse2 avx2 avx512f"), "x86_64");
  ok(a !== null && /^[0-9a-f]{64}$/.test(a));
  strictEqual(cpuIdentity(x86("avx512f avx2 fpu sse2"), "x86_64"), a, "flag order does not matter");
  notStrictEqual(cpuIdentity(x86("fpu sse2 avx2"), "x86_64"), a, "without AVX-512 it differs");
  notStrictEqual(cpuIdentity(x86("fpu sse2 avx2 avx512f", "17"), "x86_64"), a, "another model");
  const arm = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd sve\n" +
    "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU part\t: 0xd0c\n";
  ok(cpuIdentity(arm, "aarch64") !== null);
  strictEqual(cpuIdentity("processor\t: 0\n", "x86_64"), null);
  strictEqual(cpuIdentity(null), null);
});

Deno.test("optimised-graph cache: a model rewritten in memory is cached by its bytes, named by the file it came from", async () => {
  const { dir, model, cache } = await setup();
  try {
    const ext = [{ path: "weights.pb", data: unet.external!.data }];
    const runtime = recordingRuntime();
    const outcomes: CacheOutcome[] = [];
    const openBytes = (data: Uint8Array) =>
      openThroughCache(
        { bytes: unet.model, externalData: [{ path: "weights.pb", data }], from: model },
        { ...OPTIONS, optimizedCache: cache },
        runtime,
        (o) => outcomes.push(o),
      );
    const a = await openBytes(unet.external!.data);
    const expected = await outputOf(a);
    await a.release();
    strictEqual(runtime.calls[0].path, "(bytes)");
    const [folder] = await folders(cache);
    ok(folder.startsWith("unet-"), folder);
    const record = JSON.parse(
      await Deno.readTextFile(join(cache, folder, OPTIMIZED_RECORD)),
    ) as OptimizedRecord;
    strictEqual(record.source, await Deno.realPath(model));
    deepStrictEqual(record.key.sources.map((x) => [x.name, x.size]), [
      ["(bytes)", unet.model.length],
      ["weights.pb", unet.external!.data.length],
    ]);
    const b = await openBytes(unet.external!.data);
    deepStrictEqual(runtime.calls[1].path, join(cache, folder, OPTIMIZED_MODEL));
    deepStrictEqual(await outputOf(b), expected);
    await b.release();
    // Other bytes (another rewrite, other weights) are another key.
    const c = await openBytes(unet.external!.data.map((v, i) => (i === 0 ? v ^ 1 : v)));
    await c.release();
    deepStrictEqual(outcomes.map((o) => o.state), ["built", "hit", "built"]);

    // createSessionFromBytes caches only with the file the bytes came from.
    const d = await createSessionFromBytes(unet.model, ext, {
      ...OPTIONS,
      optimizedCache: join(dir, "c2"),
    });
    await d.release();
    strictEqual(await Deno.stat(join(dir, "c2")).catch(() => null), null);
    const e = await createSessionFromBytes(unet.model, ext, {
      ...OPTIONS,
      optimizedCache: join(dir, "c3"),
      readFrom: model,
    });
    await e.release();
    strictEqual((await folders(join(dir, "c3"))).length, 1);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("optimised-graph cache: a named rewrite of a file is keyed by the file and the name, and found again without its bytes", async () => {
  const { dir, model, cache } = await setup();
  try {
    const runtime = recordingRuntime();
    const outcomes: CacheOutcome[] = [];
    const options = { ...OPTIONS, optimizedCache: cache };
    const rewrite = "test rewrite, v1";
    // Nothing kept yet: the caller must rewrite the file and open the bytes.
    strictEqual(await openCachedRewrite({ from: model, rewrite }, options, runtime), null);
    const a = await openThroughCache(
      {
        bytes: unet.model,
        externalData: [{ path: "weights.pb", data: unet.external!.data }],
        from: model,
        rewrite,
      },
      options,
      runtime,
      (o) => outcomes.push(o),
    );
    const expected = await outputOf(a);
    await a.release();
    const [folder] = await folders(cache);
    const record = JSON.parse(
      await Deno.readTextFile(join(cache, folder, OPTIMIZED_RECORD)),
    ) as OptimizedRecord;
    // The file's own names and sizes (hashed once, remembered), then the rewrite: no "(bytes)".
    deepStrictEqual(record.key.sources.map((x) => [x.name, x.size]), [
      ["model.onnx", unet.model.length],
      ["weights.pb", unet.external!.data.length],
      [`(rewritten: ${rewrite})`, 0],
    ]);

    // A later start finds it with the file and the name alone, and it computes the same.
    const calls = runtime.calls.length;
    const b = await openCachedRewrite(
      { from: model, rewrite },
      options,
      runtime,
      (o) => outcomes.push(o),
    );
    ok(b, "the kept graph opens");
    deepStrictEqual(runtime.calls.slice(calls).map((c) => c.path), [
      join(cache, folder, OPTIMIZED_MODEL),
    ]);
    deepStrictEqual(await outputOf(b), expected);
    await b.release();
    deepStrictEqual(outcomes.map((o) => o.state), ["built", "hit"]);

    // Another rewrite's name, or no cache folder, finds nothing.
    strictEqual(
      await openCachedRewrite({ from: model, rewrite: "test rewrite, v2" }, options, runtime),
      null,
    );
    strictEqual(await openCachedRewrite({ from: model, rewrite }, OPTIONS, runtime), null);
    // A changed file is another key: nothing is found, and the stale folder is left for the sweep.
    const changed = unet.external!.data.map((v, i) => (i === 0 ? v ^ 1 : v));
    await Deno.writeFile(join(dir, "unet", "weights.pb"), changed);
    strictEqual(await openCachedRewrite({ from: model, rewrite }, options, runtime), null);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("optimised-graph cache: pre-packed weights ONNX Runtime writes off their 64-byte boundary are left out; the second start runs, same numbers", async () => {
  // The SD 1.x text encoder as the converter builds it, 32 wide: its 77×77 float causal mask
  // (23,716 bytes) puts every smaller pre-packed projection after it off the boundary MLAS's
  // aligned loads need. Kept as written, the reopened graph died with SIGSEGV at its first run.
  const dir = await Deno.makeTempDir({ prefix: "optimized_cache_te_" });
  try {
    const model = join(dir, "text_encoder", "model.onnx");
    await Deno.mkdir(join(dir, "text_encoder"));
    await buildSd15TextEncoder(new Rng(5, "narrow text encoder"), TEST_TEXT_ENCODER).graph
      .writeModel(model, { opset: OPSET });
    const cache = join(dir, "cache");
    const ids = new Int32Array(77).fill(49407);
    ids.set([49406, 320, 1929, 530, 518, 3240]);
    const run = async (session: Session) => {
      const out = await session.run({ input_ids: new Tensor("int32", ids, [1, 77]) });
      return [toFloat32(out.last_hidden_state), toFloat32(out.pooler_output)];
    };
    const options: SessionOptions = { intraOpThreads: 1, label: "text_encoder" };
    const plain = await createSession(model, options);
    const expected = await run(plain);
    await plain.release();

    const runtime = recordingRuntime();
    let outcome: CacheOutcome | undefined;
    const first = await openThroughCache(
      { path: model },
      { ...options, optimizedCache: cache },
      runtime,
      (o) => outcome = o,
    );
    deepStrictEqual(await run(first), expected);
    await first.release();
    strictEqual(outcome?.state, "built");
    deepStrictEqual(
      runtime.calls.map((c) => [c.path, c.o.saveOptimized?.prepacked]),
      [[model, true], [model, false]],
      "optimised once with pre-packed weights, then again without them",
    );
    strictEqual(outcome.prepacked, false);
    const record = JSON.parse(
      await Deno.readTextFile(join(outcome.folder, OPTIMIZED_RECORD)),
    ) as OptimizedRecord;
    ok(
      record.withoutPrepacked?.includes(`off a ${PREPACKED_ALIGNMENT}-byte boundary`),
      String(record.withoutPrepacked),
    );
    strictEqual(record.key.prepacked, true, "the key is what was asked: found again next time");
    deepStrictEqual((await readModelInfo(join(outcome.folder, OPTIMIZED_MODEL))).prepacked, []);

    let again: CacheOutcome | undefined;
    const second = await openThroughCache(
      { path: model },
      { ...options, optimizedCache: cache },
      runtime,
      (o) => again = o,
    );
    strictEqual(again?.state, "hit");
    strictEqual(runtime.calls.length, 3);
    strictEqual(runtime.calls[2].path, join(outcome.folder, OPTIMIZED_MODEL));
    deepStrictEqual(await run(second), expected);
    await second.release();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
