/**
 * Which model outputs stay on the GPU (ONNX Runtime's "gpu-buffer" output
 * location) because they only feed another session:
 *
 * - the text encoder's hidden states, fed to the UNet (and the ControlNet)
 *   at every step: `[2, 77, 768]` fp16 = 231 KiB per step for CFG, uploaded
 *   again at each step when they come back to the CPU;
 * - a ControlNet's 13 residuals, fed to the residual UNet at the same step:
 *   at 512×512 with CFG about 17 MB of fp16 read back and uploaded again per
 *   step.
 *
 * Latents cannot stay there: the scheduler runs in JavaScript, so the UNet's
 * noise prediction has to come back at every step (`[2, 4, 64, 64]` fp16 =
 * 64 KiB down, the scaled sample 64 KiB up; docs/gpu.md weighs that cost).
 *
 * A location is fixed when the session is created, so the plan is made from
 * what the model files declare (`readModelInfo`, no session), before the
 * producer is opened: an output stays on the device only where every
 * consumer takes exactly its dtype (nothing can convert it there) and, for
 * residuals, where the ControlNet applies `conditioning_scale` itself (else
 * they are scaled in JavaScript). Anything unclear keeps the CPU location:
 * the plan is an optimisation, never a new failure (the loader reports a bad
 * file as it always did).
 *
 * @module
 */

import {
  checkSession,
  type Component,
  type ExecutionProvider,
  type OutputLocation,
  readModelInfo,
  type ResolvedIo,
} from "../onnx/mod.ts";

/** Output name → location, as `SessionOptions.outputLocations` takes it. */
export type OutputPlan = Record<string, OutputLocation>;

/** The contract resolution of a file's declared I/O, or null when it cannot be read or resolved. */
async function declared(component: Component, path: string): Promise<ResolvedIo | null> {
  try {
    return checkSession(component, await readModelInfo(path));
  } catch {
    return null;
  }
}

/** A consumer of the hidden states: the model file and its component. */
export interface HiddenStatesConsumer {
  /** "unet", "controlnet_unet" or "controlnet". */
  component: Component;
  /** Its file. */
  path: string;
}

/**
 * The text encoder's output plan: its `last_hidden_state` on the device when
 * the provider is webgpu and every consumer's `encoder_hidden_states` has
 * its dtype; else none (everything on the CPU).
 */
export async function hiddenStatesPlan(
  provider: ExecutionProvider,
  textEncoderPath: string,
  consumers: readonly HiddenStatesConsumer[],
): Promise<OutputPlan | undefined> {
  if (provider !== "webgpu" || consumers.length === 0) return undefined;
  const encoder = await declared("text_encoder", textEncoderPath);
  const out = encoder?.outputs.last_hidden_state;
  if (!out) return undefined;
  for (const c of consumers) {
    const io = await declared(c.component, c.path);
    if (io?.inputs.encoder_hidden_states?.dtype !== out.dtype) return undefined;
  }
  return { [out.name]: "gpu-buffer" };
}

/**
 * A ControlNet's output plan: its 13 residuals on the device when the
 * provider is webgpu, the ControlNet takes `conditioning_scale` (so nothing
 * is scaled in JavaScript) and each residual has the dtype of the residual
 * UNet input it feeds; else none.
 */
export async function residualsPlan(
  provider: ExecutionProvider,
  controlnetPath: string,
  unetIo: ResolvedIo,
): Promise<OutputPlan | undefined> {
  if (provider !== "webgpu") return undefined;
  const cn = await declared("controlnet", controlnetPath);
  const produced = cn?.residuals;
  const consumed = unetIo.residuals;
  if (!cn?.hasConditioningScale || !produced || !consumed) return undefined;
  if (produced.length !== consumed.length) return undefined;
  if (produced.some((r, i) => r.dtype !== consumed[i].dtype)) return undefined;
  return Object.fromEntries(produced.map((r) => [r.name, "gpu-buffer" as const]));
}
