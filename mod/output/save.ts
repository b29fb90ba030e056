/**
 * Writes PNGs to the output folder without ever overwriting a file.
 *
 * @module
 */

import { join } from "node:path";
import { ToolError } from "../mcp/tool.ts";

/**
 * Saves `bytes` as `dir/fileName`, creating `dir` if needed. When the name is
 * taken (two images of one seed in the same second), `-2`, `-3`, … is
 * inserted before `.png`; the existing file is never touched because the
 * file is opened with `createNew`.
 *
 * @returns the path written (`dir` joined with the final file name)
 * @throws ToolError("saving") when the folder or the file cannot be written
 */
export async function savePng(dir: string, fileName: string, bytes: Uint8Array): Promise<string> {
  try {
    await Deno.mkdir(dir, { recursive: true });
  } catch (error) {
    throw new ToolError(
      "saving",
      `cannot create output directory ${dir} (output.dir): ${(error as Error).message}`,
    );
  }
  const stem = fileName.replace(/\.png$/, "");
  for (let attempt = 1; attempt <= 1000; attempt++) {
    const path = join(dir, attempt === 1 ? fileName : `${stem}-${attempt}.png`);
    let file: Deno.FsFile;
    try {
      file = await Deno.open(path, { write: true, createNew: true });
    } catch (error) {
      if (error instanceof Deno.errors.AlreadyExists) continue;
      throw new ToolError("saving", `cannot write ${path}: ${(error as Error).message}`);
    }
    try {
      let written = 0;
      while (written < bytes.length) written += await file.write(bytes.subarray(written));
    } catch (error) {
      file.close();
      await Deno.remove(path).catch(() => {});
      throw new ToolError("saving", `cannot write ${path}: ${(error as Error).message}`);
    }
    file.close();
    return path;
  }
  throw new ToolError("saving", `cannot find a free file name for ${fileName} in ${dir}`);
}
