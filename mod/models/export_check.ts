/**
 * Checks an ONNX export before it is locked (`deno task models add`): finds
 * the files of a diffusers-ONNX folder (the layout both the diffusers script
 * and `optimum-cli export onnx` write), reads each model's declared I/O from
 * the file and checks it against the model contract, follows each model's
 * external-data references (a missing or short data file is caught here, not
 * at start-up), and says which flavour it is. Single files (ControlNets,
 * annotators, LoRAs) are checked the same way.
 *
 * The onnx and lora files are imported directly, not through their mod.ts:
 * those load onnxruntime-node, and this runs under the `models` permission
 * set, which has no FFI.
 *
 * @module
 */

import { dirname, join } from "node:path";
import { checkSession, type Component, type ResolvedIo } from "../onnx/contract.ts";
import { readModelInfo } from "../onnx/model_info.ts";
import { parseSafetensors } from "../lora/safetensors.ts";
import { loraModules } from "../lora/lora_layout.ts";
import { EmbeddingFileError, loadEmbeddingFile } from "../prompt/embedding_file.ts";
import type { ModelComponent } from "./lock.ts";
import { statOrNull } from "./stat_or_null.ts";

/** One file to lock: path relative to the checked folder, and its component. */
export interface ExportFile {
  /** "/"-separated, relative to the folder given (for a single file: its own folder). */
  path: string;
  /** models.lock component. */
  component: ModelComponent;
}

/** What {@link checkExportFolder} / {@link checkComponentFile} found. */
export interface ExportCheck {
  /** The files to lock (models and their external data, tokenizer, scheduler). */
  files: ExportFile[];
  /** Every contract or file problem, one line each; empty = fit to lock. */
  problems: string[];
  /** Human-readable flavour, e.g. "diffusers script layout, fp16 I/O". */
  flavour?: string;
  /** Whether the folder holds a `controlnet_unet/model.onnx`. */
  controlnetUnet?: boolean;
  /** Files and folders of the export that are not used (safety_checker/, model_index.json …). */
  ignored: string[];
}

/** The base models of a diffusers-ONNX folder: subfolder, contract component. */
const BASE_MODELS: ReadonlyArray<readonly [string, Component & ModelComponent]> = [
  ["text_encoder", "text_encoder"],
  ["unet", "unet"],
  ["vae_decoder", "vae_decoder"],
  ["vae_encoder", "vae_encoder"],
];

/** Which contract a lock component's model has. */
export const CONTRACT_OF: Partial<Record<ModelComponent, Component>> = {
  text_encoder: "text_encoder",
  unet: "unet",
  vae_decoder: "vae_decoder",
  vae_encoder: "vae_encoder",
  controlnet_unet: "controlnet_unet",
  controlnet_depth: "controlnet",
  controlnet_openpose: "controlnet",
  controlnet_inpaint: "controlnet",
  depth: "depth",
  pose_detector: "pose_detector",
  pose_estimator: "pose_estimator",
};

function bytes(n: number): string {
  return `${n.toLocaleString("en-US")} bytes`;
}

/**
 * Checks one ONNX model (`rel` under `dir`) against `contract`; adds it and
 * its external-data files to `files`, problems to `problems`.
 */
async function checkModel(
  dir: string,
  rel: string,
  component: ModelComponent,
  contract: Component,
  files: ExportFile[],
  problems: string[],
): Promise<ResolvedIo | undefined> {
  const abs = join(dir, rel);
  const stat = await statOrNull(abs);
  if (!stat) {
    problems.push(`${rel}: missing (the ${component} model)`);
    return undefined;
  }
  if (!stat.isFile) {
    problems.push(`${rel}: not a regular file`);
    return undefined;
  }
  let info;
  try {
    info = await readModelInfo(abs);
  } catch (e) {
    problems.push(`${rel}: ${(e as Error).message.replace(/^[^:]*\.onnx: /, "")}`);
    return undefined;
  }
  files.push({ path: rel, component });
  const folder = rel.includes("/") ? rel.slice(0, rel.lastIndexOf("/") + 1) : "";
  for (const ref of info.externalData) {
    const dataRel = `${folder}${ref.location}`;
    if (ref.location.includes("..") || ref.location.startsWith("/")) {
      problems.push(`${rel}: external data location "${ref.location}" leaves the model's folder`);
      continue;
    }
    const data = await statOrNull(join(dir, dataRel));
    if (!data) {
      problems.push(
        `${dataRel}: missing (${rel} keeps ${ref.tensors} weight tensors in it; copy it next to the model)`,
      );
      continue;
    }
    if (data.size < ref.end) {
      problems.push(
        `${dataRel}: truncated: ${bytes(data.size)}, but ${rel} reads up to byte ${
          ref.end.toLocaleString("en-US")
        }`,
      );
      continue;
    }
    files.push({ path: dataRel, component });
  }
  try {
    return checkSession(contract, info);
  } catch (e) {
    problems.push(`${rel}: ${(e as Error).message}`);
    return undefined;
  }
}

async function jsonProblem(abs: string): Promise<string | undefined> {
  try {
    const doc = JSON.parse(await Deno.readTextFile(abs));
    return doc !== null && typeof doc === "object" && !Array.isArray(doc)
      ? undefined
      : "not a JSON object";
  } catch (e) {
    return e instanceof Deno.errors.NotFound
      ? "missing"
      : `not valid JSON: ${(e as Error).message}`;
  }
}

/**
 * Checks a diffusers-ONNX folder: `text_encoder/ unet/ vae_decoder/
 * vae_encoder/` models (each `model.onnx` + its external data), `tokenizer/`
 * (`vocab.json` + `merges.txt`, or `tokenizer.json`; other files there come
 * along), `scheduler/scheduler_config.json`, and `controlnet_unet/model.onnx`
 * when present. Nothing is written.
 */
export async function checkExportFolder(dir: string): Promise<ExportCheck> {
  const files: ExportFile[] = [];
  const problems: string[] = [];
  const ignored: string[] = [];
  const stat = await statOrNull(dir);
  if (!stat?.isDirectory) {
    return { files, problems: [`${dir}: not a folder`], ignored };
  }
  const io: Partial<Record<string, ResolvedIo>> = {};
  for (const [sub, component] of BASE_MODELS) {
    io[sub] = await checkModel(dir, `${sub}/model.onnx`, component, component, files, problems);
  }
  const hasCnUnet = (await statOrNull(join(dir, "controlnet_unet/model.onnx"))) !== null;
  if (hasCnUnet) {
    io.controlnet_unet = await checkModel(
      dir,
      "controlnet_unet/model.onnx",
      "controlnet_unet",
      "controlnet_unet",
      files,
      problems,
    );
  }

  // Tokenizer: the BPE pair, or tokenizer.json; every file of the folder is locked.
  const tokDir = join(dir, "tokenizer");
  const tokFiles: string[] = [];
  try {
    for await (const e of Deno.readDir(tokDir)) if (e.isFile) tokFiles.push(e.name);
  } catch {
    // reported below
  }
  tokFiles.sort();
  const hasJson = tokFiles.includes("tokenizer.json");
  const hasBpe = tokFiles.includes("vocab.json") && tokFiles.includes("merges.txt");
  if (!hasJson && !hasBpe) {
    problems.push(
      "tokenizer/: missing vocab.json + merges.txt (or tokenizer.json): copy the tokenizer/ " +
        "folder of the checkpoint you exported",
    );
  }
  for (const name of tokFiles) {
    if (name.endsWith(".json")) {
      const p = await jsonProblem(join(tokDir, name));
      if (p) {
        problems.push(`tokenizer/${name}: ${p}`);
        continue;
      }
    }
    files.push({ path: `tokenizer/${name}`, component: "tokenizer" });
  }
  const sched = await jsonProblem(join(dir, "scheduler/scheduler_config.json"));
  if (sched) problems.push(`scheduler/scheduler_config.json: ${sched}`);
  else files.push({ path: "scheduler/scheduler_config.json", component: "scheduler" });

  // Checks across models (as the loader does them at start-up).
  const te = io.text_encoder;
  for (
    const [sub, model] of [["unet", io.unet], ["controlnet_unet", io.controlnet_unet]] as const
  ) {
    if (!model) continue;
    if (model.sampleChannels === 9) {
      problems.push(
        `${sub}/model.onnx: an inpainting UNet (input \`sample\` has 9 channels); use a ` +
          "text-to-image UNet (4 channels): inpainting goes through the inpaint ControlNet",
      );
    }
    if (
      te && typeof te.hiddenSize === "number" && typeof model.hiddenSize === "number" &&
      te.hiddenSize !== model.hiddenSize
    ) {
      problems.push(
        `${sub}/model.onnx: \`encoder_hidden_states\` has width ${model.hiddenSize} but the text ` +
          `encoder's \`last_hidden_state\` has ${te.hiddenSize} (models from different checkpoints?)`,
      );
    }
  }
  for await (const e of Deno.readDir(dir)) {
    const used = [...BASE_MODELS.map(([s]) => s), "tokenizer", "scheduler", "controlnet_unet"];
    if (!used.includes(e.name) && !e.name.startsWith(".")) {
      ignored.push(e.isDirectory ? `${e.name}/` : e.name);
    }
  }
  ignored.sort();
  return {
    files,
    problems,
    flavour: flavourOf(io.text_encoder, io.unet, files),
    controlnetUnet: hasCnUnet,
    ignored,
  };
}

/**
 * "diffusers script layout, fp32 I/O" / "Optimum layout, fp16 I/O"
 * (docs/models.md "Export flavours").
 */
function flavourOf(
  te: ResolvedIo | undefined,
  unet: ResolvedIo | undefined,
  files: readonly ExportFile[],
): string | undefined {
  if (!unet) return undefined;
  const ids = te?.inputs.input_ids?.dtype;
  const data = files.find((f) => f.component === "unet" && f.path !== "unet/model.onnx")?.path;
  const optimum = data?.endsWith("model.onnx_data") || ids === "int64" ||
    unet.timestep?.kind === "steps" || unet.timestep?.kind === "scalar";
  const floats = new Set(
    [unet.inputs.sample, unet.outputs.out_sample, te?.outputs.last_hidden_state]
      .filter((p) => p !== undefined).map((p) => p!.dtype),
  );
  const precision = floats.size > 1 ? "mixed fp16/fp32" : floats.has("float16") ? "fp16" : "fp32";
  const extra = unet.hasTimestepCond ? ", LCM UNet (timestep_cond)" : "";
  return `${optimum ? "Optimum" : "diffusers script"} layout, ${precision} I/O${extra}`;
}

/**
 * Checks one file of a component: an ONNX model (ControlNet, ControlNet-UNet,
 * annotator) with its external data, or a kohya LoRA `.safetensors`.
 * Paths in the result are relative to the file's folder.
 */
export async function checkComponentFile(
  file: string,
  component: ModelComponent | "tiny_vae_decoder",
): Promise<ExportCheck> {
  const files: ExportFile[] = [];
  const problems: string[] = [];
  const dir = dirname(file);
  const name = file.slice(dir.length + 1);
  if (component === "lora") {
    const stat = await statOrNull(file);
    if (!stat?.isFile) return { files, problems: [`${name}: missing`], ignored: [] };
    try {
      // The layouts the engine reads (mod/lora/lora_layout.ts): kohya, then diffusers/PEFT.
      const lora = loraModules(parseSafetensors(await Deno.readFile(file), name), name);
      if (lora.modules.length === 0) {
        problems.push(
          `${name}: no LoRA modules (kohya keys lora_unet_… / lora_te_… with .lora_down.weight ` +
            "and .lora_up.weight, or diffusers/PEFT keys unet.….lora_A.weight and .lora_B.weight)",
        );
      } else files.push({ path: name, component });
    } catch (e) {
      problems.push(`${name}: ${(e as Error).message}`);
    }
    return { files, problems, ignored: [] };
  }
  if (component === "embedding") {
    // Read as the server reads it (mod/prompt embedding_file.ts): the format, one [n, width]
    // tensor, at most 75 vectors.
    try {
      await loadEmbeddingFile(file);
      files.push({ path: name, component });
    } catch (e) {
      if (!(e instanceof EmbeddingFileError)) throw e;
      problems.push(e.message.startsWith(file) ? name + e.message.slice(file.length) : e.message);
    }
    return { files, problems, ignored: [] };
  }
  if (component === "tiny_vae_decoder") {
    // A TAESD decoder in ONNX has the VAE decoder's contract (latent_sample → sample) and is
    // locked as a vae_decoder file outside the base set.
    await checkModel(dir, name, "vae_decoder", "vae_decoder", files, problems);
    return { files, problems, ignored: [] };
  }
  const contract = CONTRACT_OF[component];
  if (
    !contract ||
    !["controlnet", "controlnet_unet", "depth", "pose_detector", "pose_estimator"].includes(
      contract,
    )
  ) {
    return {
      files,
      problems: [
        `--component ${component} is part of a base set: add the whole folder with ` +
        "`deno task models add DIR`",
      ],
      ignored: [],
    };
  }
  await checkModel(dir, name, component, contract, files, problems);
  return { files, problems, ignored: [] };
}
