/**
 * The I/O contract this project expects of each model, declared once, and
 * {@link checkSession}, which checks an open session against it and resolves
 * what the pipeline needs to feed it (names, dtypes, timestep shape, channel
 * counts, residual mapping). Sources, restated with their public
 * origins in docs/models.md: the diffusers script, Optimum and Olive exports;
 * the OnnxStack/axodox and onnx-web ControlNet conventions and residual
 * names; the MiDaS, YOLOX and DWPose annotators.
 *
 * @module
 */

import type { IoMeta, SessionIo } from "./runtime.ts";
import type { TimestepKind } from "./tensors.ts";

/** Model roles the server loads. */
export type Component =
  | "text_encoder"
  | "unet"
  | "vae_decoder"
  | "vae_encoder"
  | "controlnet"
  | "controlnet_unet"
  | "depth"
  | "pose_detector"
  | "pose_estimator";

/** One declared input or output of a component. */
export interface PortSpec {
  /** Key under which the port is resolved. */
  readonly role: string;
  /** Accepted graph names, canonical first. Empty: matched by position. */
  readonly names: readonly string[];
  /** Accepted element types. */
  readonly dtypes: readonly string[];
  /** Accepted ranks. */
  readonly ranks: readonly number[];
  /** Allowed values of fixed dims, by axis; symbolic dims always pass. */
  readonly dims?: Readonly<Record<number, readonly number[]>>;
  /** An optional port may be absent. */
  readonly optional?: boolean;
}

/** The contract of one component. */
export interface ComponentContract {
  /** Inputs; every model input must be one of these (or a residual, see `residualInputs`). */
  readonly inputs: readonly PortSpec[];
  /** Outputs the pipeline reads; other outputs are ignored. */
  readonly outputs: readonly PortSpec[];
  /** Matches the only input / the first outputs by position instead of by name. */
  readonly positional?: boolean;
  /** ControlNet: 12 down + 1 mid residual outputs. */
  readonly residualOutputs?: boolean;
  /** ControlNet-UNet: 12 down + 1 mid residual inputs. */
  readonly residualInputs?: boolean;
}

const FLOAT = ["float32", "float16"] as const;
const INT_IDS = ["int32", "int64"] as const;
const TIMESTEP = ["float32", "float16", "int64"] as const;

/** Names of residual `i` (0..11 down, 12 mid) in the OnnxStack/axodox convention. */
export function residualName(i: number): string {
  return i === 12 ? "mid_block_additional_residual" : `down_block_${i}_additional_residual`;
}

/** Name of residual `i` in the onnx-web "cnet" UNet (ssube/onnx-web `cnet.py`). */
export function onnxWebResidualName(i: number): string {
  return i === 12 ? "mid_block_additional_residual" : `down_block_${i}`;
}

const UNET_INPUTS: readonly PortSpec[] = [
  { role: "sample", names: ["sample"], dtypes: FLOAT, ranks: [4], dims: { 1: [4, 9] } },
  { role: "timestep", names: ["timestep"], dtypes: TIMESTEP, ranks: [0, 1] },
  { role: "encoder_hidden_states", names: ["encoder_hidden_states"], dtypes: FLOAT, ranks: [3] },
  { role: "timestep_cond", names: ["timestep_cond"], dtypes: FLOAT, ranks: [2], optional: true },
];
const UNET_OUTPUTS: readonly PortSpec[] = [
  { role: "out_sample", names: ["out_sample"], dtypes: FLOAT, ranks: [4], dims: { 1: [4] } },
];

/** The declared contract of every component. */
export const CONTRACTS: Readonly<Record<Component, ComponentContract>> = {
  text_encoder: {
    inputs: [{ role: "input_ids", names: ["input_ids"], dtypes: INT_IDS, ranks: [2] }],
    outputs: [
      { role: "last_hidden_state", names: ["last_hidden_state"], dtypes: FLOAT, ranks: [3] },
      {
        role: "pooler_output",
        names: ["pooler_output"],
        dtypes: FLOAT,
        ranks: [2],
        optional: true,
      },
    ],
  },
  unet: { inputs: UNET_INPUTS, outputs: UNET_OUTPUTS },
  controlnet_unet: { inputs: UNET_INPUTS, outputs: UNET_OUTPUTS, residualInputs: true },
  vae_decoder: {
    inputs: [{
      role: "latent_sample",
      names: ["latent_sample"],
      dtypes: FLOAT,
      ranks: [4],
      dims: { 1: [4] },
    }],
    outputs: [{ role: "sample", names: ["sample"], dtypes: FLOAT, ranks: [4], dims: { 1: [3] } }],
  },
  vae_encoder: {
    inputs: [{ role: "sample", names: ["sample"], dtypes: FLOAT, ranks: [4], dims: { 1: [3] } }],
    outputs: [{
      role: "latent",
      names: ["latent_sample", "latent_parameters"],
      dtypes: FLOAT,
      ranks: [4],
    }],
  },
  controlnet: {
    inputs: [
      { role: "sample", names: ["sample"], dtypes: FLOAT, ranks: [4], dims: { 1: [4] } },
      { role: "timestep", names: ["timestep"], dtypes: TIMESTEP, ranks: [0, 1] },
      {
        role: "encoder_hidden_states",
        names: ["encoder_hidden_states"],
        dtypes: FLOAT,
        ranks: [3],
      },
      {
        role: "controlnet_cond",
        names: ["controlnet_cond"],
        dtypes: FLOAT,
        ranks: [4],
        dims: { 1: [3] },
      },
      {
        role: "conditioning_scale",
        names: ["conditioning_scale"],
        dtypes: ["float64", "float32", "float16"],
        ranks: [0, 1],
        dims: { 0: [1] },
        optional: true,
      },
    ],
    outputs: [],
    residualOutputs: true,
  },
  depth: {
    positional: true,
    inputs: [{ role: "image", names: [], dtypes: FLOAT, ranks: [4], dims: { 0: [1], 1: [3] } }],
    outputs: [{ role: "depth", names: [], dtypes: FLOAT, ranks: [3, 4], dims: { 0: [1] } }],
  },
  pose_detector: {
    positional: true,
    inputs: [{ role: "image", names: [], dtypes: FLOAT, ranks: [4], dims: { 0: [1], 1: [3] } }],
    outputs: [{ role: "detections", names: [], dtypes: FLOAT, ranks: [3], dims: { 0: [1] } }],
  },
  pose_estimator: {
    positional: true,
    inputs: [{ role: "image", names: [], dtypes: FLOAT, ranks: [4], dims: { 1: [3] } }],
    outputs: [
      { role: "simcc_x", names: ["simcc_x"], dtypes: FLOAT, ranks: [3] },
      { role: "simcc_y", names: ["simcc_y"], dtypes: FLOAT, ranks: [3] },
    ],
  },
};

/** A port found in the model. */
export interface ResolvedPort {
  /** Graph name to feed or read. */
  readonly name: string;
  /** Declared element type. */
  readonly dtype: string;
  /** Declared shape (symbolic dims as strings). */
  readonly shape: readonly (number | string)[];
}

/** One ControlNet residual, index 0..11 = down blocks, 12 = mid block. */
export interface ResolvedResidual extends ResolvedPort {
  /** 0..11 down residuals, 12 the mid residual. */
  readonly index: number;
  /** Channel count when fixed in the model, else the symbolic dim name. */
  readonly channels: number | string;
}

/** What {@link checkSession} found; fields not relevant to the component are absent. */
export interface ResolvedIo {
  /** The component checked. */
  readonly component: Component;
  /** Resolved inputs by role (see {@link CONTRACTS}). */
  readonly inputs: Readonly<Record<string, ResolvedPort>>;
  /** Resolved outputs by role. */
  readonly outputs: Readonly<Record<string, ResolvedPort>>;
  /** UNet/ControlNet: timestep feed dtype and shape kind. */
  readonly timestep?: {
    readonly name: string;
    readonly dtype: string;
    readonly kind: TimestepKind;
  };
  /** UNet: whether the model takes `timestep_cond` (LCM-distilled UNets). */
  readonly hasTimestepCond?: boolean;
  /** UNet/ControlNet `sample` channels (4, or 9 for an inpainting UNet) when fixed. */
  readonly sampleChannels?: number | string;
  /** Text hidden size: text encoder output dim 2, or UNet/ControlNet `encoder_hidden_states` dim 2. */
  readonly hiddenSize?: number | string;
  /** VAE encoder: `latent_sample` (4 channels, sampled) or `latent_parameters` (8, mean ‖ logvar). */
  readonly vaeEncoderOutput?: "latent_sample" | "latent_parameters";
  /** VAE latent channels: 4 for decoder input / latent_sample, 8 for latent_parameters. */
  readonly latentChannels?: number;
  /** ControlNet outputs (in residual order) or ControlNet-UNet residual inputs. */
  readonly residuals?: readonly ResolvedResidual[];
  /** How residuals were matched: by OnnxStack names, onnx-web names, or output position. */
  readonly residualNaming?: "additional_residual" | "onnx_web" | "position";
  /** ControlNet: whether `conditioning_scale` is a model input (else scale the outputs yourself). */
  readonly hasConditioningScale?: boolean;
  /** Depth: rank of the output, 3 = [1,H,W], 4 = [1,1,H,W]. */
  readonly depthOutputRank?: 3 | 4;
  /** Depth/pose models: input height and width (numbers when fixed). */
  readonly imageSize?: { readonly height: number | string; readonly width: number | string };
  /** Pose estimator: keypoint count (dim 1 of simcc_x). */
  readonly keypoints?: number | string;
}

/**
 * Checks a session's inputs and outputs against the component's contract and
 * resolves how to drive it. Throws an Error naming the first mismatch, e.g.
 * "unet input `timestep`: expected one of float32/float16/int64, got int8".
 */
export function checkSession(component: Component, session: SessionIo): ResolvedIo {
  const contract = CONTRACTS[component];
  if (!contract) throw new Error(`unknown component ${component}`);
  const inputs: Record<string, ResolvedPort> = {};
  const outputs: Record<string, ResolvedPort> = {};

  if (contract.positional) {
    resolvePositional(component, "input", contract.inputs, session.inputs, inputs, true);
    resolvePositional(component, "output", contract.outputs, session.outputs, outputs, false);
  } else {
    const used = new Set<string>();
    for (const spec of contract.inputs) {
      const port = resolveNamed(component, "input", spec, session.inputs);
      if (port) {
        inputs[spec.role] = port;
        used.add(port.name);
      }
    }
    let residuals: ResolvedResidual[] | undefined;
    let naming: ResolvedIo["residualNaming"];
    if (contract.residualInputs) {
      ({ residuals, naming } = resolveResidualInputs(component, session.inputs));
      for (const r of residuals) used.add(r.name);
    }
    const extra = session.inputs.filter((m) => !used.has(m.name));
    if (extra.length > 0) {
      const expected = contract.inputs.map((s) => s.names[0]);
      if (contract.residualInputs) expected.push("13 residual inputs");
      throw new Error(
        `${component} input \`${extra[0].name}\`: not part of the ${component} contract ` +
          `(expected inputs: ${expected.join(", ")})`,
      );
    }
    for (const spec of contract.outputs) {
      const port = resolveNamed(component, "output", spec, session.outputs);
      if (port) outputs[spec.role] = port;
    }
    if (contract.residualOutputs) {
      ({ residuals, naming } = resolveResidualOutputs(component, session.outputs));
    }
    return finish(component, inputs, outputs, residuals, naming);
  }
  return finish(component, inputs, outputs, undefined, undefined);
}

/**
 * Compares a ControlNet's residual outputs with a ControlNet-UNet's residual
 * inputs, index by index. Returns one line per mismatch (channel count or
 * rank); empty when they fit. Symbolic channel dims cannot be compared here
 * and are skipped (ORT reports them at run time). Float dtypes may differ:
 * convert with `castFloatTensor`.
 */
export function residualMismatches(controlnet: ResolvedIo, unet: ResolvedIo): string[] {
  const cn = controlnet.residuals;
  const un = unet.residuals;
  if (controlnet.component !== "controlnet" || !cn) {
    return [`expected a resolved controlnet, got ${controlnet.component}`];
  }
  if (unet.component !== "controlnet_unet" || !un) {
    return [`expected a resolved controlnet_unet, got ${unet.component}`];
  }
  const problems: string[] = [];
  for (let i = 0; i < 13; i++) {
    const a = cn[i];
    const b = un[i];
    if (
      typeof a.channels === "number" && typeof b.channels === "number" && a.channels !== b.channels
    ) {
      problems.push(
        `controlnet residual ${i} (\`${a.name}\`) has ${a.channels} channels but controlnet_unet ` +
          `input \`${b.name}\` expects ${b.channels}`,
      );
    }
  }
  return problems;
}

/** Throws an Error listing every mismatch {@link residualMismatches} finds. */
export function assertResidualsMatch(controlnet: ResolvedIo, unet: ResolvedIo): void {
  const problems = residualMismatches(controlnet, unet);
  if (problems.length > 0) {
    throw new Error(`controlnet does not fit controlnet_unet: ${problems.join("; ")}`);
  }
}

// ---------------------------------------------------------------------------

function resolveNamed(
  component: Component,
  dir: "input" | "output",
  spec: PortSpec,
  metas: readonly IoMeta[],
): ResolvedPort | undefined {
  const meta = metas.find((m) => spec.names.includes(m.name));
  if (!meta) {
    if (spec.optional) return undefined;
    const names = spec.names.map((n) => `\`${n}\``).join(" or ");
    throw new Error(
      `${component} ${dir} ${names}: missing (model ${dir}s: ${
        metas.map((m) => m.name).join(", ") || "none"
      })`,
    );
  }
  checkPort(`${component} ${dir} \`${meta.name}\``, spec, meta);
  return { name: meta.name, dtype: meta.dtype, shape: meta.shape };
}

function resolvePositional(
  component: Component,
  dir: "input" | "output",
  specs: readonly PortSpec[],
  metas: readonly IoMeta[],
  into: Record<string, ResolvedPort>,
  exact: boolean,
): void {
  if (exact ? metas.length !== specs.length : metas.length < specs.length) {
    throw new Error(
      `${component}: expected ${
        exact ? "" : "at least "
      }${specs.length} ${dir}(s), got ${metas.length}` +
        ` (${metas.map((m) => m.name).join(", ") || "none"})`,
    );
  }
  // Named ports (pose_estimator's simcc_x/simcc_y) are matched by name when all names are present.
  const byName = specs.every((s) => s.names.length > 0) &&
    specs.every((s) => metas.some((m) => s.names.includes(m.name)));
  specs.forEach((spec, i) => {
    const meta = byName ? metas.find((m) => spec.names.includes(m.name))! : metas[i];
    checkPort(`${component} ${dir} \`${meta.name}\``, spec, meta);
    into[spec.role] = { name: meta.name, dtype: meta.dtype, shape: meta.shape };
  });
}

function checkPort(label: string, spec: PortSpec, meta: IoMeta): void {
  if (!spec.dtypes.includes(meta.dtype)) {
    throw new Error(`${label}: expected one of ${spec.dtypes.join("/")}, got ${meta.dtype}`);
  }
  if (!spec.ranks.includes(meta.shape.length)) {
    throw new Error(
      `${label}: expected rank ${spec.ranks.join(" or ")}, got rank ${meta.shape.length} ` +
        `[${meta.shape.join(",")}]`,
    );
  }
  for (const [axisText, allowed] of Object.entries(spec.dims ?? {})) {
    const axis = Number(axisText);
    const dim = meta.shape[axis];
    if (typeof dim === "number" && !allowed.includes(dim)) {
      throw new Error(
        `${label}: expected dim ${axis} = ${allowed.join(" or ")}, got ${dim} [${
          meta.shape.join(",")
        }]`,
      );
    }
  }
}

function residualPortSpec(i: number, names: string[]): PortSpec {
  return { role: `residual_${i}`, names, dtypes: FLOAT, ranks: [4] };
}

function toResidual(i: number, meta: IoMeta): ResolvedResidual {
  return {
    index: i,
    name: meta.name,
    dtype: meta.dtype,
    shape: meta.shape,
    channels: meta.shape[1],
  };
}

function resolveResidualInputs(
  component: Component,
  metas: readonly IoMeta[],
): { residuals: ResolvedResidual[]; naming: ResolvedIo["residualNaming"] } {
  const residuals: ResolvedResidual[] = [];
  let onnxWeb = false;
  for (let i = 0; i < 13; i++) {
    const names = i === 12 ? [residualName(12)] : [residualName(i), onnxWebResidualName(i)];
    const spec = residualPortSpec(i, names);
    const port = resolveNamed(component, "input", spec, metas)!;
    if (i < 12 && port.name === onnxWebResidualName(i)) onnxWeb = true;
    residuals.push(toResidual(i, metas.find((m) => m.name === port.name)!));
  }
  return { residuals, naming: onnxWeb ? "onnx_web" : "additional_residual" };
}

function resolveResidualOutputs(
  component: Component,
  metas: readonly IoMeta[],
): { residuals: ResolvedResidual[]; naming: ResolvedIo["residualNaming"] } {
  const named = Array.from({ length: 13 }, (_, i) => metas.find((m) => m.name === residualName(i)));
  let picked: IoMeta[];
  let naming: ResolvedIo["residualNaming"];
  if (named.every((m) => m !== undefined)) {
    picked = named as IoMeta[];
    naming = "additional_residual";
  } else if (metas.length === 13) {
    // onnx-web exports name only the first two outputs (and misleadingly):
    // the 13 outputs are in order, so use them by position (onnx-web's `control.py` names only two).
    picked = [...metas];
    naming = "position";
  } else {
    throw new Error(
      `${component} outputs: expected 13 residuals named down_block_{0..11}_additional_residual + ` +
        `mid_block_additional_residual, or exactly 13 outputs to match by position; got ${metas.length}` +
        ` (${metas.map((m) => m.name).join(", ") || "none"})`,
    );
  }
  return {
    residuals: picked.map((m, i) => {
      checkPort(`${component} output \`${m.name}\``, residualPortSpec(i, [m.name]), m);
      return toResidual(i, m);
    }),
    naming,
  };
}

function timestepKind(shape: readonly (number | string)[]): TimestepKind {
  if (shape.length === 0) return "scalar";
  const d = shape[0];
  if (d === 1) return "one";
  if (typeof d === "string" && /step/i.test(d)) return "steps";
  return "batch";
}

function finish(
  component: Component,
  inputs: Record<string, ResolvedPort>,
  outputs: Record<string, ResolvedPort>,
  residuals: ResolvedResidual[] | undefined,
  residualNaming: ResolvedIo["residualNaming"],
): ResolvedIo {
  const base = { component, inputs, outputs };
  switch (component) {
    case "text_encoder":
      return { ...base, hiddenSize: outputs.last_hidden_state.shape[2] };
    case "unet":
    case "controlnet_unet":
    case "controlnet": {
      const ts = inputs.timestep;
      return {
        ...base,
        timestep: { name: ts.name, dtype: ts.dtype, kind: timestepKind(ts.shape) },
        sampleChannels: inputs.sample.shape[1],
        hiddenSize: inputs.encoder_hidden_states.shape[2],
        ...(component === "controlnet"
          ? { hasConditioningScale: inputs.conditioning_scale !== undefined }
          : { hasTimestepCond: inputs.timestep_cond !== undefined }),
        ...(residuals ? { residuals, residualNaming } : {}),
      };
    }
    case "vae_decoder":
      return { ...base, latentChannels: 4 };
    case "vae_encoder": {
      const latent = outputs.latent;
      const kind = latent.name === "latent_parameters" ? "latent_parameters" : "latent_sample";
      const channels = kind === "latent_parameters" ? 8 : 4;
      const dim = latent.shape[1];
      if (typeof dim === "number" && dim !== channels) {
        throw new Error(
          `vae_encoder output \`${latent.name}\`: expected dim 1 = ${channels}, got ${dim} ` +
            `[${latent.shape.join(",")}]`,
        );
      }
      return { ...base, vaeEncoderOutput: kind, latentChannels: channels };
    }
    case "depth": {
      const out = outputs.depth;
      if (out.shape.length === 4 && typeof out.shape[1] === "number" && out.shape[1] !== 1) {
        throw new Error(
          `depth output \`${out.name}\`: expected dim 1 = 1, got ${out.shape[1]} [${
            out.shape.join(",")
          }]`,
        );
      }
      return {
        ...base,
        depthOutputRank: out.shape.length as 3 | 4,
        imageSize: imageSize(inputs.image),
      };
    }
    case "pose_detector": {
      const out = outputs.detections;
      const last = out.shape[2];
      if (typeof last === "number" && last < 6) {
        throw new Error(
          `pose_detector output \`${out.name}\`: expected dim 2 >= 6 (4 box + objectness + classes), ` +
            `got ${last} [${out.shape.join(",")}]`,
        );
      }
      return { ...base, imageSize: imageSize(inputs.image) };
    }
    case "pose_estimator": {
      const kx = outputs.simcc_x.shape[1];
      const ky = outputs.simcc_y.shape[1];
      if (typeof kx === "number" && typeof ky === "number" && kx !== ky) {
        throw new Error(
          `pose_estimator outputs: \`${outputs.simcc_x.name}\` has ${kx} keypoints but ` +
            `\`${outputs.simcc_y.name}\` has ${ky}`,
        );
      }
      return {
        ...base,
        imageSize: imageSize(inputs.image),
        keypoints: kx,
      };
    }
  }
}

function imageSize(port: ResolvedPort): { height: number | string; width: number | string } {
  return { height: port.shape[2], width: port.shape[3] };
}
