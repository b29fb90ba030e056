/**
 * PyTorch `.ckpt`/`.pt`/`.bin` files read without executing pickle code.
 *
 * @module
 */

import { CheckpointError } from "./errors.ts";
import type { WeightFile } from "./weights.ts";

/** Opens a PyTorch zip or legacy file. */
export function openTorchFile(path: string, kind: "zip" | "legacy"): Promise<WeightFile> {
  return Promise.reject(
    new CheckpointError(`${path}: a PyTorch ${kind} file; reading these is not implemented yet`),
  );
}
