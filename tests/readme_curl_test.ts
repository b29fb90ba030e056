/**
 * The README's curl examples work as printed: every `sh` block of its "Any
 * HTTP client, with an API key" section is run with bash (`set -euo
 * pipefail`), only `http://127.0.0.1:8080` replaced by the test server's
 * address and `$KEY` set to a real write key, against the app started
 * in-process over HTTP on the tiny models (keys in the test database), in a
 * temporary folder. Each block must write `cube.png`, a PNG of the
 * `portrait_512` size (384×512) that the examples ask for.
 */

import { ignoredFor } from "./helpers/ignore.ts";
import assert from "node:assert/strict";
import { join } from "node:path";
import { createKey } from "../mod/auth/create_key.ts";
import { startApp } from "../mod/app/mod.ts";
import { loadConfig } from "../mod/config/mod.ts";
import { openTestDatabase } from "./helpers/postgres.ts";
import { ROOT } from "./helpers/paths.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";

const SECTION = "#### Any HTTP client, with an API key";

/** The `sh` fenced blocks between `heading` and the next heading of any level. */
function shBlocks(markdown: string, heading: string): string[] {
  const start = markdown.indexOf(`\n${heading}\n`);
  assert.ok(start >= 0, `README.md has no "${heading}"`);
  const rest = markdown.slice(start + heading.length + 2);
  const blocks: string[] = [];
  let inside: string[] | null = null;
  for (const line of rest.split("\n")) {
    if (inside === null && /^#{1,6} /.test(line)) break;
    if (inside === null && line === "```sh") inside = [];
    else if (inside !== null && line === "```") {
      blocks.push(inside.join("\n"));
      inside = null;
    } else inside?.push(line);
  }
  return blocks;
}

/** Width and height from a PNG's IHDR chunk. */
function pngSize(bytes: Uint8Array): [number, number] {
  assert.deepEqual([...bytes.subarray(0, 8)], [137, 80, 78, 71, 13, 10, 26, 10], "a PNG signature");
  const view = new DataView(bytes.buffer, bytes.byteOffset);
  return [view.getUint32(16), view.getUint32(20)];
}

/** The commands the examples use that this machine lacks (`.ci/run` installs them). */
const missing = ["bash", "curl", "jq", "base64"].filter((tool) =>
  new Deno.Command("sh", { args: ["-c", `command -v ${tool}`], stdout: "null" }).outputSync()
    .code !== 0
);

Deno.test({
  ...ignoredFor(
    missing.length ? `${missing.join(", ")} not installed (.ci/run installs them)` : undefined,
    "README: the curl examples run as printed and each writes the image it promises",
  ),
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const blocks = shBlocks(await Deno.readTextFile(join(ROOT, "README.md")), SECTION);
    // 2025 era, 2026-07-28 without tasks, 2026-07-28 with a task and tasks/get.
    assert.equal(blocks.length, 3, "the section's sh blocks");
    assert.ok(blocks.every((b) => b.includes("http://127.0.0.1:8080/mcp")));
    assert.ok(blocks[2].includes("-H 'mcp-method: tasks/get' -H \"mcp-name: $TASK\""));

    const tdb = await openTestDatabase("readme_curl");
    const temp = await writeTinyConfig(`[generation]\nsteps = 3\n`);
    const work = await Deno.makeTempDir({ prefix: "readme-curl-" });
    try {
      const { key } = await createKey(tdb.db, { projectId: 1, userId: 1, permission: "write" });
      const config = await loadConfig({
        path: temp.path,
        overrides: { transport: "http" },
        env: { DATABASE_URL: tdb.url },
      });
      const app = await startApp(config);
      try {
        const base = `http://127.0.0.1:${app.http!.port}`;
        for (const [i, block] of blocks.entries()) {
          await t.step(`block ${i + 1}: ${block.split("\n")[0].slice(0, 60)}`, async () => {
            await Deno.remove(join(work, "cube.png")).catch(() => {});
            const script = block.replaceAll("http://127.0.0.1:8080", base);
            const out = await new Deno.Command("bash", {
              args: ["-c", `set -euo pipefail\n${script}`],
              cwd: work,
              env: { KEY: key },
              stdout: "piped",
              stderr: "piped",
            }).output();
            const stderr = new TextDecoder().decode(out.stderr);
            assert.equal(out.code, 0, `block ${i + 1} failed: ${stderr}`);
            const png = await Deno.readFile(join(work, "cube.png"));
            assert.deepEqual(pngSize(png), [384, 512]);
          });
        }
      } finally {
        await app.shutdown();
      }
    } finally {
      await Deno.remove(work, { recursive: true });
      await temp.remove();
      await tdb.close();
    }
  },
});
