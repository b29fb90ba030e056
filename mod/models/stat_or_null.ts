/**
 * `Deno.stat` that answers `null` for a missing file, so that "absent" is a
 * value the model checks and downloads branch on rather than an exception.
 *
 * @module
 */

/**
 * Stats `path`; `null` when nothing is there.
 *
 * @param path The file or folder to stat.
 * @returns Its info, or `null` when it does not exist; any other error is thrown.
 */
export async function statOrNull(path: string): Promise<Deno.FileInfo | null> {
  try {
    return await Deno.stat(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
  }
}
