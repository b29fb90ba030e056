/**
 * The ControlNet hook of the denoising loop (a separate ControlNet and a
 * ControlNet-UNet, as TensorStack-AI/OnnxStack `ControlNetDiffuser.cs` and
 * axodox `ControlNetInferer.cpp` run them): run the ControlNet on the same
 * scaled sample, timestep and text embeddings as the UNet plus the control
 * image, and bind its 12 down + 1 mid residuals to the
 * residual UNet's inputs.
 *
 * @module
 */

import {
  castFloatTensor,
  type Feeds,
  floatTensor,
  type ResolvedIo,
  scalarTensor,
  type Tensor,
  timestepTensor,
  toFloat32,
} from "../onnx/mod.ts";
import type { ModelSession } from "./model_session.ts";

/** A loaded ControlNet with its resolved I/O and strength. */
export interface ControlNetModel {
  /** The open ControlNet. */
  session: ModelSession;
  /** Its contract resolution (`checkSession("controlnet", …)`). */
  io: ResolvedIo;
  /** `conditioning_scale` from the config. */
  conditioningScale: number;
}

/**
 * One generation's ControlNet inputs that do not change between steps
 * (text embeddings, control image, scale), built once in the model's dtypes.
 */
export class ControlNetRun {
  readonly #model: ControlNetModel;
  readonly #unetIo: ResolvedIo;
  readonly #fixed: Feeds;
  /** Whether the residuals must be scaled here (no `conditioning_scale` input). */
  readonly #scaleOutside: boolean;

  /**
   * @param model the ControlNet
   * @param unetIo the residual UNet's resolved I/O (`checkSession("controlnet_unet", …)`)
   * @param hidden text embeddings `[B, 77, hidden]` (B = the UNet batch), on the CPU or the
   *   GPU (then already in the ControlNet's dtype)
   * @param cond control image `[B, 3, H, W]`, already repeated for the CFG batch
   * @param condDims its shape
   */
  constructor(
    model: ControlNetModel,
    unetIo: ResolvedIo,
    hidden: Tensor,
    cond: Float32Array,
    condDims: readonly number[],
  ) {
    this.#model = model;
    this.#unetIo = unetIo;
    const inputs = model.io.inputs;
    const fixed: Feeds = {
      [inputs.encoder_hidden_states.name]: castFloatTensor(
        hidden,
        inputs.encoder_hidden_states.dtype,
      ),
      [inputs.controlnet_cond.name]: floatTensor(inputs.controlnet_cond.dtype, cond, condDims),
    };
    const scale = inputs.conditioning_scale;
    if (scale) {
      // A Python float in the export's dummy inputs becomes a double input (OnnxStack
      // `CreateConditioningScaleTensor` feeds DenseTensor<double>([scale], [1])).
      fixed[scale.name] = scalarTensor(scale.dtype, model.conditioningScale, scale.shape);
    }
    this.#scaleOutside = !scale;
    this.#fixed = fixed;
  }

  /**
   * Runs the ControlNet for one step and returns the residual feeds of the
   * residual UNet, by its input names and in its dtypes. When the
   * ControlNet was opened to leave its residuals on the GPU they are passed
   * on as they are (same dtype, scaled by the model): the caller frees them
   * after the UNet step (`releaseDeviceTensor`). Without a
   * `conditioning_scale` input every residual is multiplied by the scale here:
   * diffusers' `ControlNetModel.forward` does exactly that multiplication
   * (`controlnets/controlnet.py`, "down_block_res_samples = [sample *
   * conditioning_scale …]"), as onnx-web does outside the graph.
   */
  async residuals(sample: Float32Array, sampleDims: readonly number[], t: number): Promise<Feeds> {
    const io = this.#model.io;
    const inputs = io.inputs;
    const feeds: Feeds = {
      ...this.#fixed,
      [inputs.sample.name]: floatTensor(inputs.sample.dtype, sample, sampleDims),
      [io.timestep!.name]: timestepTensor(io.timestep!, t, sampleDims[0]),
    };
    const cnResiduals = io.residuals!;
    const out = await this.#model.session.run(feeds, cnResiduals.map((r) => r.name));
    const unetResiduals = this.#unetIo.residuals!;
    const bound: Feeds = {};
    for (let i = 0; i < 13; i++) {
      const produced = out[cnResiduals[i].name];
      if (!produced) {
        throw new Error(`controlnet did not return residual ${i} (\`${cnResiduals[i].name}\`)`);
      }
      const target = unetResiduals[i];
      bound[target.name] = this.#scaleOutside
        ? scaled(produced, this.#model.conditioningScale, target.dtype)
        : castFloatTensor(produced, target.dtype);
    }
    return bound;
  }
}

/** `tensor · scale` as a new tensor of `dtype` (float32 arithmetic). */
function scaled(tensor: Tensor, scale: number, dtype: string): Tensor {
  const values = toFloat32(tensor);
  const out = new Float32Array(values.length);
  const s = Math.fround(scale);
  for (let i = 0; i < values.length; i++) out[i] = values[i] * s;
  return floatTensor(dtype, out, tensor.dims);
}
