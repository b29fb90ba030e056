/**
 * As root, a local account pre-creates `server.data_dir` (here under /tmp)
 * with `postgres.lock` and `postgres` as symbolic links to a file and a
 * directory of root's. `deno task keys list` and the server's start must
 * refuse, saying which directory and why, and leave both untouched; so must
 * the same links in a data directory of root's (as a swap would leave them).
 */

import assert from "node:assert/strict";
import { makeReachableTempDir } from "./helpers/postgres.ts";
import { runKeysCli } from "./helpers/keys_cli.ts";
import { serveOnce } from "./helpers/serve_once.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";
import { ignoredFor } from "./helpers/ignore.ts";

/** The `nobody` account, the attacker. */
const NOBODY = "65534";

/** Runs `sh -c script` as nobody. */
async function asNobody(script: string): Promise<void> {
  const run = await new Deno.Command("setpriv", {
    args: ["--reuid", NOBODY, "--regid", NOBODY, "--clear-groups", "--", "sh", "-c", script],
    stdout: "null",
    stderr: "piped",
  }).output();
  assert.ok(run.success, new TextDecoder().decode(run.stderr));
}

/** `deno task keys list` on the embedded default (whatever DATABASE_URL says here). */
function keysList(config: string) {
  return runKeysCli(["list", "--config", config], { env: {}, clearEnv: true, quiet: true });
}

/** What the victim's file and directory look like (owner, mode, content, entries). */
async function snapshot(file: string, dir: string): Promise<string> {
  const f = await Deno.lstat(file);
  const d = await Deno.lstat(dir);
  const entries = [];
  for await (const entry of Deno.readDir(dir)) entries.push(entry.name);
  return JSON.stringify({
    file: [f.uid, f.gid, f.mode, await Deno.readTextFile(file)],
    dir: [d.uid, d.gid, d.mode, entries.sort()],
  });
}

Deno.test({
  ...ignoredFor(
    Deno.uid() === 0 ? undefined : "not running as root",
    "as root, links planted in server.data_dir are never followed",
  ),
  async fn(t) {
    const base = await makeReachableTempDir("sdmcp-links-");
    const temp = await writeTinyConfig();
    try {
      const victim = `${base}/victim`;
      await Deno.mkdir(`${victim}/keep`, { recursive: true });
      await Deno.chmod(victim, 0o755);
      await Deno.chmod(`${victim}/keep`, 0o755);
      await Deno.writeTextFile(`${victim}/precious`, "root's file\n", { mode: 0o644 });
      const before = await snapshot(`${victim}/precious`, `${victim}/keep`);
      const useDataDir = async (dataDir: string) =>
        await Deno.writeTextFile(
          temp.path,
          (await Deno.readTextFile(temp.path)).replace(
            /^data_dir = .*$/m,
            `data_dir = ${JSON.stringify(dataDir)}`,
          ),
        );

      const attacker = `${base}/attacker`;
      await Deno.mkdir(attacker, { mode: 0o755 });
      await Deno.chown(attacker, Number(NOBODY), Number(NOBODY));
      await asNobody(
        `mkdir ${attacker}/data && ln -s ${victim}/precious ${attacker}/data/postgres.lock && ` +
          `ln -s ${victim}/keep ${attacker}/data/postgres`,
      );
      await useDataDir(`${attacker}/data`);
      const refusal = new RegExp(
        `refusing ${attacker}: it is a directory on the way to the data directory ${attacker}/data, owned by nobody \\(uid 65534\\)`,
      );

      await t.step("deno task keys list refuses, naming the directory and why", async () => {
        const run = await keysList(temp.path);
        assert.equal(run.code, 1, run.stderr);
        assert.match(run.stderr, refusal);
        assert.match(run.stderr, /chown root /);
        assert.equal(await snapshot(`${victim}/precious`, `${victim}/keep`), before);
      });

      await t.step("the server refuses to start, and says the same", async () => {
        const run = await serveOnce(temp.path);
        assert.equal(run.code, 1, run.stderr);
        assert.match(run.stderr, /start-up failed: refusing /);
        assert.match(run.stderr, refusal);
        assert.equal(await snapshot(`${victim}/precious`, `${victim}/keep`), before);
      });

      await t.step("the same links in a data directory of root's are not followed", async () => {
        const own = `${base}/own/data`;
        await Deno.mkdir(own, { recursive: true, mode: 0o755 });
        await Deno.symlink(`${victim}/precious`, `${own}/postgres.lock`);
        await Deno.symlink(`${victim}/keep`, `${own}/postgres`);
        await useDataDir(own);
        let run = await keysList(temp.path);
        assert.equal(run.code, 1, run.stderr);
        assert.match(
          run.stderr,
          new RegExp(`refusing ${own}/postgres.lock: it is a symbolic link`),
        );
        await Deno.remove(`${own}/postgres.lock`);
        run = await keysList(temp.path);
        assert.equal(run.code, 1, run.stderr);
        assert.match(run.stderr, new RegExp(`refusing ${own}/postgres: it is a symbolic link`));
        assert.equal(await snapshot(`${victim}/precious`, `${victim}/keep`), before);
        // With the links gone, the same directory serves.
        await Deno.remove(`${own}/postgres`);
        run = await keysList(temp.path);
        assert.equal(run.code, 0, run.stderr);
      });
    } finally {
      await temp.remove();
      await Deno.remove(base, { recursive: true });
    }
  },
});
