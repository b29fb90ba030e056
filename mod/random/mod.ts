/**
 * Torch-compatible CPU randomness: MT19937, `torch.randn`/`torch.rand` on a
 * seeded `torch.Generator("cpu")`, and CSPRNG seeds.
 *
 * @module
 */

export { Mt19937 } from "./mt19937.ts";
export { TorchGenerator } from "./torch_generator.ts";
export type { NormalKernel, TorchGeneratorOptions } from "./torch_generator.ts";
export { randomSeedU32 } from "./seed.ts";
