/**
 * Writes PNGs to the output folder without ever overwriting a file.
 *
 * @module
 */

import { basename, join } from "node:path";
import { log } from "../log/mod.ts";
import { ToolError } from "../mcp/tool.ts";

/**
 * An OS error message with the server's absolute paths taken out: the
 * output folder becomes `output.dir`, and any other absolute path (a parent
 * of it) becomes `…`. The model, and through it a remote user, should learn
 * what to fix, not where the server keeps its files; the log keeps the full
 * message for the operator.
 */
function scrub(error: unknown, dir: string): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.replaceAll(dir, "output.dir").replace(/'\/[^']*'/g, "'…'");
}

function savingError(what: string, error: unknown, dir: string): ToolError {
  log("error", "output", what, {
    dir,
    error: error instanceof Error ? error.message : String(error),
  });
  return new ToolError("saving", `${what}: ${scrub(error, dir)}`);
}

/**
 * How a file {@link savePng} wrote is named to a client (a tool text):
 * `output.dir/<file name>`. The user knows the folder by its setting; the
 * server's absolute path says nothing a remote caller should know.
 */
export function shownPath(saved: string): string {
  return `output.dir/${basename(saved)}`;
}

/**
 * Saves `bytes` as `dir/fileName`, creating `dir` if needed. When the name is
 * taken (two images of one seed in the same second), `-2`, `-3`, … is
 * inserted before `.png`; the existing file is never touched because the
 * file is opened with `createNew`.
 *
 * @returns the path written (`dir` joined with the final file name)
 * @throws ToolError("saving") when the folder or the file cannot be written;
 *   its message names paths relative to `output.dir`, never `dir` itself
 */
export async function savePng(dir: string, fileName: string, bytes: Uint8Array): Promise<string> {
  // Defence in depth: names are cleaned where they come in, and a job's stored request is checked
  // before it runs; a name that could leave `dir` is still never written.
  if (!/^[A-Za-z0-9_-][A-Za-z0-9_.-]*\.png$/.test(fileName) || fileName.includes("..")) {
    throw new ToolError(
      "saving",
      `refusing to save ${JSON.stringify(fileName.slice(0, 80))}: a saved image's name must be ` +
        "one file name inside output.dir",
    );
  }
  try {
    await Deno.mkdir(dir, { recursive: true });
  } catch (error) {
    throw savingError("cannot create the output directory (output.dir)", error, dir);
  }
  const stem = fileName.replace(/\.png$/, "");
  for (let attempt = 1; attempt <= 1000; attempt++) {
    const name = attempt === 1 ? fileName : `${stem}-${attempt}.png`;
    const path = join(dir, name);
    let file: Deno.FsFile;
    try {
      file = await Deno.open(path, { write: true, createNew: true });
    } catch (error) {
      if (error instanceof Deno.errors.AlreadyExists) continue;
      throw savingError(`cannot write output.dir/${name}`, error, dir);
    }
    try {
      let written = 0;
      while (written < bytes.length) written += await file.write(bytes.subarray(written));
    } catch (error) {
      file.close();
      await Deno.remove(path).catch(() => {});
      throw savingError(`cannot write output.dir/${name}`, error, dir);
    }
    file.close();
    return path;
  }
  throw new ToolError("saving", `cannot find a free file name for ${fileName} in output.dir`);
}
