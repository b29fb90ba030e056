import { match, ok, strictEqual, throws } from "node:assert";
import { DatabaseError } from "./database.ts";
import { safeDataDir } from "./safe_dir.ts";
import { ignoredFor } from "../../tests/helpers/ignore.ts";

const uid = Deno.uid()!;
const root = uid === 0;
/** The `nobody` account: another user that may own what it planted. */
const NOBODY = 65534;

/** A directory `path` with `mode`, owned by `owner` (root only). */
function dir(path: string, mode: number, owner = uid): string {
  Deno.mkdirSync(path);
  Deno.chmodSync(path, mode);
  if (owner !== uid) Deno.chownSync(path, owner, owner);
  return path;
}

/** Asserts `safeDataDir(path)` is refused for `culprit`, with a reason matching `why`. */
function refused(path: string, culprit: string, why: RegExp): void {
  throws(() => safeDataDir(path, uid), (error: unknown) => {
    ok(error instanceof DatabaseError, String(error));
    strictEqual(error.code, "UNSAFE_PATH");
    ok(error.message.startsWith(`refusing ${culprit}: `), error.message);
    match(error.message, why);
    // It says what to do.
    match(error.message, /; .*(chown|chmod|remove|set server\.data_dir)/);
    return true;
  });
}

Deno.test("safeDataDir", async (t) => {
  // Under /tmp (root's, sticky): a parent the check accepts.
  const base = Deno.realPathSync(Deno.makeTempDirSync({ prefix: "sdmcp-safe-" }));
  Deno.chmodSync(base, 0o755);
  try {
    await t.step("creates what is missing and returns the path", () => {
      const wanted = `${base}/made/data`;
      strictEqual(safeDataDir(wanted, uid), wanted);
      strictEqual(Deno.lstatSync(wanted).isDirectory, true);
      strictEqual(Deno.lstatSync(wanted).mode! & 0o022, 0, "created without group/other write");
      strictEqual(safeDataDir(wanted, uid), wanted, "and accepts it the next time");
    });

    await t.step("a sticky directory of root's is passed through, but is no data dir", () => {
      const sticky = dir(`${base}/sticky`, 0o1777);
      strictEqual(safeDataDir(`${sticky}/data`, uid), `${sticky}/data`);
      refused(sticky, sticky, /the data directory, writable by .*mode 1777.*sticky bit/);
    });

    await t.step("a directory writable by its group or by others is refused", () => {
      const group = dir(`${base}/group`, 0o775);
      refused(`${group}/data`, group, /writable by its group \(mode 775\)/);
      const world = dir(`${base}/world`, 0o757);
      refused(`${world}/data`, world, /writable by all users \(mode 757\)/);
      ok(!Deno.statSync(group).isSymlink);
      throws(() => Deno.lstatSync(`${group}/data`), Deno.errors.NotFound, "nothing made below");
    });

    await t.step("a file on the way is refused", () => {
      Deno.writeTextFileSync(`${base}/file`, "");
      refused(`${base}/file/data`, `${base}/file`, /not a directory/);
    });

    await t.step("a link of root's is followed, and the result has no link left", () => {
      const target = dir(`${base}/target`, 0o755);
      Deno.symlinkSync("target", `${base}/relative`);
      Deno.symlinkSync(`${base}/relative/../target`, `${base}/absolute`);
      strictEqual(safeDataDir(`${base}/absolute/data`, uid), `${target}/data`);
    });

    await t.step({
      ...ignoredFor(
        root ? undefined : "not running as root",
        "as root: another account's directory, sticky directory or link is refused",
      ),
      fn() {
        const theirs = dir(`${base}/theirs`, 0o755, NOBODY);
        refused(`${theirs}/data`, theirs, /owned by nobody \(uid 65534\)/);
        // The attack: data_dir itself pre-created by another account.
        refused(theirs, theirs, /the data directory, owned by nobody/);
        // Their sticky directory: its owner may remove and replace anything in it.
        const theirSticky = dir(`${base}/their-sticky`, 0o1777, NOBODY);
        refused(`${theirSticky}/data`, theirSticky, /owned by nobody .*sticky bit does not stop/);
        // In root's sticky directory another account may own a link and re-point it.
        const sticky = `${base}/sticky`;
        const safe = dir(`${base}/safe`, 0o755);
        Deno.symlinkSync(safe, `${sticky}/link`);
        const lchown = new Deno.Command("chown", {
          args: ["-h", `${NOBODY}:${NOBODY}`, `${sticky}/link`],
        }).outputSync();
        ok(lchown.success);
        refused(`${sticky}/link/data`, `${sticky}/link`, /symbolic link .*owned by nobody/);
        // Below another account's directory, even a directory of root's is refused.
        const below = dir(`${theirs}/roots`, 0o755, 0);
        refused(`${below}/data`, theirs, /owned by nobody/);
      },
    });
  } finally {
    Deno.removeSync(base, { recursive: true });
  }
});
