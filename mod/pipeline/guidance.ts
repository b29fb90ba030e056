/**
 * Classifier-free guidance and the LCM guidance-scale embedding.
 *
 * @module
 */

const fround = Math.fround;

/**
 * Combines a batch-2 UNet output laid out `[uncond; text]` (uncond first, as
 * diffusers concatenates the prompt embeddings) into one guided noise
 * prediction: `uncond + g·(text − uncond)` (diffusers
 * `pipeline_onnx_stable_diffusion.py`, the `do_classifier_free_guidance`
 * branch), evaluated in float32 like the numpy/torch original.
 */
export function applyGuidance(output: Float32Array, guidanceScale: number): Float32Array {
  if (output.length % 2 !== 0) {
    throw new RangeError(
      `applyGuidance: a batch-2 output has an even length, got ${output.length}`,
    );
  }
  const n = output.length / 2;
  const out = new Float32Array(n);
  const g = fround(guidanceScale);
  for (let i = 0; i < n; i++) {
    const uncond = output[i];
    const text = output[n + i];
    out[i] = fround(uncond + fround(g * fround(text - uncond)));
  }
  return out;
}

/**
 * The guidance-scale embedding LCM-distilled UNets take as `timestep_cond`
 * (diffusers `pipeline_latent_consistency_text2img.py`
 * `get_guidance_scale_embedding`, fed `guidance_scale − 1`):
 * `w = (g − 1)·1000`; `f_i = exp(−i·log(10000)/(half − 1))` for
 * `i < half = dim/2`; the result is `[sin(w·f), cos(w·f)]`, zero-padded by one
 * when `dim` is odd. float32 at the points where torch rounds.
 */
export function guidanceScaleEmbedding(guidanceScale: number, dim: number): Float32Array {
  if (!Number.isInteger(dim) || dim < 2) {
    throw new RangeError(`guidanceScaleEmbedding: dim must be an integer >= 2, got ${dim}`);
  }
  const w = fround(fround(guidanceScale - 1) * 1000);
  const half = Math.floor(dim / 2);
  const out = new Float32Array(dim);
  // torch.log(torch.tensor(10000.0)) / (half_dim - 1), in float32.
  const step = half > 1 ? fround(fround(Math.log(10000)) / (half - 1)) : 0;
  for (let i = 0; i < half; i++) {
    const freq = fround(Math.exp(fround(i * -step)));
    const arg = fround(w * freq);
    out[i] = Math.sin(arg);
    out[half + i] = Math.cos(arg);
  }
  return out;
}
