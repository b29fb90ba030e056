/**
 * The converters a `models.lock` `[[derived]]` entry can name: how each turns
 * its input files (pinned `[[file]]` entries) into the files of its output
 * folder, under which names, and the version that is part of every derived
 * file's key (bump it when the converter writes different bytes).
 *
 * @module
 */

import { createHash } from "node:crypto";
import { basename, join } from "node:path";
import { FP32_CONVERTER_VERSION, widenToFp32, type WrittenFile } from "./fp32.ts";
import { TAESD_CONVERTER_VERSION, taesdDecoderToOnnx } from "./taesd.ts";

/** One converter. */
export interface Converter {
  /** Part of the derived files' key: a new version rebuilds them. */
  version: number;
  /** What it does, for `models check` and logs. */
  describe: string;
  /** A problem with the inputs it is given (lock paths), or undefined. */
  inputProblem(inputs: readonly string[]): string | undefined;
  /** The file names it writes into its output folder for these inputs. */
  outputs(inputs: readonly string[]): string[];
  /** Writes the outputs from the inputs (absolute paths) into `outDir` (empty, existing). */
  run(inputs: readonly string[], outDir: string): Promise<WrittenFile[]>;
}

const names = (inputs: readonly string[]) => inputs.map((p) => basename(p));

async function writeHashed(path: string, bytes: Uint8Array): Promise<WrittenFile> {
  await Deno.writeFile(path, bytes);
  return {
    name: basename(path),
    size: bytes.length,
    sha256: createHash("sha256").update(bytes).digest("hex"),
  };
}

/** Every converter by the name a `[[derived]]` entry gives. */
export const CONVERTERS: Readonly<Record<string, Converter>> = {
  fp32: {
    version: FP32_CONVERTER_VERSION,
    describe: "an fp16 ONNX model widened to fp32",
    inputProblem(inputs) {
      const models = inputs.filter((p) => p.endsWith(".onnx"));
      return models.length === 1
        ? undefined
        : `takes one .onnx model and its external data files, got ${models.length} .onnx files`;
    },
    outputs: names,
    async run(inputs, outDir) {
      const model = inputs.find((p) => p.endsWith(".onnx"))!;
      return (await widenToFp32(model, outDir)).files;
    },
  },
  taesd: {
    version: TAESD_CONVERTER_VERSION,
    describe: "a TAESD decoder .safetensors converted to an ONNX decoder",
    inputProblem(inputs) {
      return inputs.length === 1 && inputs[0].endsWith(".safetensors")
        ? undefined
        : `takes one .safetensors file, got ${JSON.stringify(inputs)}`;
    },
    outputs: () => ["model.onnx"],
    async run(inputs, outDir) {
      const onnx = taesdDecoderToOnnx(await Deno.readFile(inputs[0]), inputs[0]);
      return [await writeHashed(join(outDir, "model.onnx"), onnx)];
    },
  },
  copy: {
    version: 1,
    describe: "a copy",
    inputProblem(inputs) {
      const n = names(inputs);
      return new Set(n).size === n.length ? undefined : "takes files with distinct names";
    },
    outputs: names,
    async run(inputs, outDir) {
      const out: WrittenFile[] = [];
      for (const p of inputs) {
        out.push(await writeHashed(join(outDir, basename(p)), await Deno.readFile(p)));
      }
      return out;
    },
  },
};

/** The converter names, for messages. */
export const CONVERTER_NAMES: readonly string[] = Object.keys(CONVERTERS);
