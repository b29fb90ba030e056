import assert from "node:assert/strict";
import { cachedZipPath, locateRuntime, type RuntimeLookup, RuntimeMissing } from "./runtime.ts";

const ELF = new Uint8Array([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]);
const ZIP = new Uint8Array([0x50, 0x4b, 0x03, 0x04, 0, 0, 0, 0]);
const TARGET = "x86_64-unknown-linux-gnu";
const CACHE = "/d/dl/release/v2.9.6/denort-x86_64-unknown-linux-gnu.zip";

function lookup(
  files: Record<string, Uint8Array>,
  options: Partial<RuntimeLookup> & { online?: boolean } = {},
) {
  const probed: string[] = [];
  const value: RuntimeLookup = {
    denoDir: "/d",
    version: "2.9.6",
    target: TARGET,
    head: (path) => Promise.resolve(files[path] ?? null),
    // As the real denort answers when run on its own.
    probe: () =>
      Promise.resolve({ code: 1, firstLine: "error: Could not find standalone binary section." }),
    reachable: (url) => {
      probed.push(url);
      return Promise.resolve(options.online ?? false);
    },
    ...options,
  };
  return { value, probed };
}

async function missing(l: RuntimeLookup): Promise<string> {
  try {
    await locateRuntime(l);
  } catch (error) {
    assert.ok(error instanceof RuntimeMissing, String(error));
    assert.equal(error.message.includes("\n"), false, "one line");
    return error.message;
  }
  assert.fail("expected RuntimeMissing");
}

Deno.test("runtime: the cache path is the one deno compile reads", () => {
  assert.equal(cachedZipPath("/d", "2.9.6", TARGET), CACHE);
});

Deno.test("runtime: DENORT_BIN wins when it is an executable", async () => {
  const { value, probed } = lookup({ "/x/denort": ELF, [CACHE]: ZIP }, { denortBin: "/x/denort" });
  assert.deepEqual(await locateRuntime(value), { kind: "env", path: "/x/denort" });
  assert.deepEqual(probed, [], "no network when the runtime is given");
});

Deno.test("runtime: a DENORT_BIN that is missing or a zip fails in one line saying how", async () => {
  const absent = await missing(lookup({}, { denortBin: "/x/denort" }).value);
  assert.match(absent, /^DENORT_BIN=\/x\/denort is not a file; /);
  assert.match(absent, /set DENORT_BIN=/);
  assert.ok(absent.includes(CACHE), "names the cache path as the other way");
  const zipped = await missing(lookup({ "/x/d.zip": ZIP }, { denortBin: "/x/d.zip" }).value);
  assert.match(zipped, /is not an executable .*unzipped first/);
});

Deno.test("runtime: a DENORT_BIN that answers --version (the deno CLI) is refused before compiling", async () => {
  const cli = await missing(
    lookup({ "/usr/bin/deno": ELF }, {
      denortBin: "/usr/bin/deno",
      probe: () =>
        Promise.resolve({
          code: 0,
          firstLine: "deno 2.9.6 (stable, release, x86_64-unknown-linux-gnu)",
        }),
    }).value,
  );
  assert.match(
    cli,
    /^DENORT_BIN=\/usr\/bin\/deno is not denort: it answers `--version` \(exit 0, "deno 2\.9\.6 .*"\), as the deno CLI does, /,
  );
  assert.ok(cli.includes(CACHE), "says how to provide the real one");
  const hangs = await missing(
    lookup({ "/x/sleep": ELF }, {
      denortBin: "/x/sleep",
      probe: () => Promise.resolve({ code: null, firstLine: "" }),
    }).value,
  );
  assert.match(hangs, /did not answer `--version` within 10 s/);
});

Deno.test("runtime: the cached zip is used offline; a file there that is no zip fails", async () => {
  const { value, probed } = lookup({ [CACHE]: ZIP });
  assert.deepEqual(await locateRuntime(value), { kind: "cache", path: CACHE });
  assert.deepEqual(probed, []);
  const junk = await missing(lookup({ [CACHE]: new TextEncoder().encode("junk\n") }).value);
  assert.match(junk, /the cached runtime .* is not a zip file/);
});

Deno.test("runtime: no DENORT_BIN, no cache, host unreachable: one line naming all three", async () => {
  const { value, probed } = lookup({});
  const message = await missing(value);
  assert.deepEqual(probed, [
    "https://dl.deno.land/release/v2.9.6/denort-x86_64-unknown-linux-gnu.zip",
  ]);
  assert.match(message, /^the Deno runtime \(denort\) for compiling is missing: no DENORT_BIN, /);
  assert.ok(message.includes(`no ${CACHE}`));
  assert.match(message, /dl\.deno\.land cannot be reached/);
  assert.match(message, /github\.com\/denoland\/deno\/releases/);
});

Deno.test("runtime: reachable host means deno compile downloads into the cache", async () => {
  const { value } = lookup({}, { online: true });
  assert.deepEqual(await locateRuntime(value), {
    kind: "download",
    url: "https://dl.deno.land/release/v2.9.6/denort-x86_64-unknown-linux-gnu.zip",
    cachePath: CACHE,
  });
});
