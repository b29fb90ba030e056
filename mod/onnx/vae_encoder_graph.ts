/**
 * Makes a Stable Diffusion VAE encoder deterministic by rewriting its graph
 * at load time: where the export samples the latent distribution inside ONNX
 * Runtime, the rewritten graph returns the distribution's parameters instead,
 * so the pipeline can draw the sample with the request's torch-compatible
 * generator exactly where diffusers draws it.
 *
 * What the exporters write (traced from `AutoencoderKL.encode`):
 *
 * - diffusers `scripts/convert_stable_diffusion_checkpoint_to_onnx.py`: the
 *   encoder's forward is `vae_encoder.encode(sample, return_dict)[0].sample()`,
 *   output `latent_sample` (4 channels).
 * - Optimum ≤ 1.22 (`optimum/exporters/utils.py`
 *   `_get_submodels_for_export_diffusion`): `{"latent_sample":
 *   vae_encoder.encode(x=sample)["latent_dist"].sample()}`, output
 *   `latent_sample` (`VaeEncoderOnnxConfig.outputs`).
 *   huggingface/optimum#1383 reports the `RandomNormalLike` node this leaves
 *   in the graph.
 * - Optimum ≥ 1.23 (commit d3c56cd5, 2024-10-09): `{"latent_parameters":
 *   ….latent_dist.parameters}`, output `latent_parameters` (8 channels, mean ‖
 *   log-variance): no random node, nothing to rewrite.
 *
 * `DiagonalGaussianDistribution` (diffusers `models/autoencoders/vae.py`)
 * splits the parameters with `torch.chunk(parameters, 2, dim=1)` into mean and
 * logvar, clamps logvar to [-30, 20], takes `std = exp(0.5·logvar)` and
 * returns `mean + std · randn_tensor(mean.shape)`. The torch exporter writes
 * `randn` of a traced shape as `RandomNormalLike(ConstantOfShape(Shape(…)))`
 * (a static shape gives `RandomNormal`) and `torch.chunk` as two `Slice`
 * nodes (opset ≥ 13) or a `Split`. {@link exposeLatentParameters} finds the
 * random node, follows it to the `Mul` by std and the `Add` of the mean that
 * produce `latent_sample`, walks std and mean back to the chunk they were cut
 * from, and makes that chunk's input — the distribution parameters — the
 * graph output `latent_parameters`; the sampling nodes, no longer needed, are
 * removed. The result has exactly Optimum ≥ 1.23's output contract.
 *
 * @module
 */

import onnx from "onnx-proto";

const P = onnx.onnx;
type NodeProto = onnx.onnx.INodeProto;
type ValueInfo = onnx.onnx.IValueInfoProto;

/** The random ops a torch export writes for `torch.randn`. */
const RANDOM_OPS: ReadonlySet<string> = new Set(["RandomNormalLike", "RandomNormal"]);
/** Ops that carry a value through unchanged in kind (the noise may be cast to the model dtype). */
const PASS_THROUGH: ReadonlySet<string> = new Set(["Cast", "Identity"]);
/** Ops between a chunk of the parameters and std or mean (clamp, ×0.5, exp, casts). */
const ELEMENTWISE: ReadonlySet<string> = new Set([
  "Cast",
  "Identity",
  "Clip",
  "Max",
  "Min",
  "Mul",
  "Div",
  "Add",
  "Sub",
  "Exp",
  "Sqrt",
  "Pow",
]);
/** How `torch.chunk` is exported. */
const CHUNK_OPS: ReadonlySet<string> = new Set(["Slice", "Split", "Gather"]);

/** The output name of the rewritten graph (Optimum ≥ 1.23's). */
export const LATENT_PARAMETERS = "latent_parameters";

/**
 * The name and version of {@link exposeLatentParameters} as a rewrite of a
 * file (the optimised-graph cache keys a rewritten graph by it and the
 * file): change the version whenever the rewrite's output changes.
 */
export const LATENT_PARAMETERS_REWRITE = "vae_encoder: latent parameters exposed, v1";

/** What {@link exposeLatentParameters} did with one encoder. */
export type VaeEncoderGraph =
  /** Output `latent_parameters` already (Optimum ≥ 1.23): used as it is. */
  | { kind: "parameters" }
  /** Output `latent_sample` with no random node: its value is taken as the latent's mean. */
  | { kind: "deterministic" }
  /** Output `latent_sample` drawn by a random node: rewritten. */
  | {
    kind: "rewritten";
    /** The rewritten model. */
    model: Uint8Array;
    /** The random node that was removed: op type and node name. */
    random: { op: string; name: string };
    /** The tensor now returned as `latent_parameters` (the chunk's input). */
    parameters: string;
    /** The op that split it into mean and logvar. */
    chunk: string;
    /** Nodes removed (the sampling tail and what only it used). */
    removedNodes: number;
  };

/** A graph that has `latent_sample` but not in a form this rewrite understands. */
export class VaeEncoderGraphError extends Error {
  /** Creates the error; `message` says what was expected and what was found. */
  constructor(message: string) {
    super(message);
    this.name = "VaeEncoderGraphError";
  }
}

/**
 * Rewrites a VAE encoder (`.onnx` bytes) so that it returns its latent
 * distribution's parameters (see the module documentation). Returns what was
 * done; the input bytes are not modified.
 *
 * @throws VaeEncoderGraphError when `latent_sample` is drawn by more than one
 *   random node or is not `mean + std · noise` of one chunked tensor
 * @throws Error when the bytes are not an ONNX model
 */
export function exposeLatentParameters(bytes: Uint8Array): VaeEncoderGraph {
  const model = P.ModelProto.decode(bytes);
  const graph = model.graph;
  if (!graph) throw new Error("not an ONNX model: no graph");
  const outputs = graph.output ?? [];
  if (outputs.some((o) => o.name === LATENT_PARAMETERS)) return { kind: "parameters" };
  const sample = outputs.find((o) => o.name === "latent_sample");
  if (!sample) {
    throw new VaeEncoderGraphError(
      `expected an output \`latent_sample\` or \`latent_parameters\`, got ${
        outputs.map((o) => `\`${o.name}\``).join(", ") || "none"
      }`,
    );
  }
  const nodes = graph.node ?? [];
  const randoms = nodes.filter((n) => RANDOM_OPS.has(n.opType ?? "") && isDefaultDomain(n));
  if (randoms.length === 0) return { kind: "deterministic" };
  if (randoms.length > 1) {
    throw new VaeEncoderGraphError(
      `expected one random node drawing \`latent_sample\`, found ${randoms.length} (${
        randoms.map(describe).join(", ")
      })`,
    );
  }
  const random = randoms[0];
  const index = new GraphIndex(graph);

  // noise → (Cast) → Mul(std, noise) → Add(mean, ·) → (Cast) → latent_sample
  const [noise] = random.output ?? [];
  const mul = index.onlyConsumerPast(noise, `the output of ${describe(random)}`);
  if (mul.node.opType !== "Mul") {
    throw new VaeEncoderGraphError(
      `expected the noise of ${describe(random)} to be multiplied by std, but it goes to ${
        describe(mul.node)
      }`,
    );
  }
  const std = otherInput(mul.node, mul.via);
  const add = index.onlyConsumerPast(mul.node.output![0], `the output of ${describe(mul.node)}`);
  if (add.node.opType !== "Add") {
    throw new VaeEncoderGraphError(
      `expected std · noise to be added to the mean, but it goes to ${describe(add.node)}`,
    );
  }
  const mean = otherInput(add.node, add.via);
  if (!index.reaches(add.node.output![0], "latent_sample")) {
    throw new VaeEncoderGraphError(
      `expected ${describe(add.node)} to give \`latent_sample\` (through casts at most)`,
    );
  }
  const fromStd = index.chunkSource(std, "std");
  const fromMean = index.chunkSource(mean, "the mean");
  if (fromStd.tensor !== fromMean.tensor) {
    throw new VaeEncoderGraphError(
      `expected mean and std to be cut from one tensor, but the mean comes from \`${fromMean.tensor}\` ` +
        `and std from \`${fromStd.tensor}\``,
    );
  }
  const parameters = fromStd.tensor;

  if (index.produced.has(LATENT_PARAMETERS) || index.isInitializer(LATENT_PARAMETERS)) {
    throw new VaeEncoderGraphError(`the graph already has a tensor named \`${LATENT_PARAMETERS}\``);
  }
  const elemType = sample.type?.tensorType?.elemType ?? 1;
  // A Cast to the output's declared type: a no-op for a graph that computes in it, the
  // conversion for one that computes in fp16 behind fp32 outputs.
  const output: NodeProto = {
    opType: "Cast",
    domain: "",
    name: "expose_latent_parameters",
    input: [parameters],
    output: [LATENT_PARAMETERS],
    attribute: [{ name: "to", type: P.AttributeProto.AttributeType.INT, i: elemType }],
  };
  const dims = sample.type?.tensorType?.shape?.dim ?? [];
  const channels = dims[1]?.dimValue !== undefined && dims[1]?.dimValue !== null
    ? { dimValue: 2 * Number(dims[1].dimValue) }
    : { dimValue: 8 };
  const parametersInfo: ValueInfo = {
    name: LATENT_PARAMETERS,
    type: {
      tensorType: {
        elemType,
        shape: { dim: dims.length === 4 ? [dims[0], channels, dims[2], dims[3]] : [] },
      },
    },
  };
  graph.output = outputs.map((o) => o === sample ? parametersInfo : o);
  const before = nodes.length;
  graph.node = prune([...nodes, output], graph.output.map((o) => o.name!));
  const live = new Set(graph.node.flatMap((n) => n.input ?? []));
  const dropped = new Set(
    (graph.initializer ?? []).filter((t) => !live.has(t.name!)).map((t) => t.name!),
  );
  graph.initializer = (graph.initializer ?? []).filter((t) => !dropped.has(t.name!));
  graph.input = (graph.input ?? []).filter((i) => !dropped.has(i.name!));
  const kept = new Set(graph.node.flatMap((n) => n.output ?? []));
  graph.valueInfo = (graph.valueInfo ?? []).filter((v) => kept.has(v.name!));
  return {
    kind: "rewritten",
    model: P.ModelProto.encode(model).finish(),
    random: { op: random.opType!, name: random.name ?? "" },
    parameters,
    chunk: fromStd.op,
    removedNodes: before + 1 - graph.node.length,
  };
}

function isDefaultDomain(n: NodeProto): boolean {
  return !n.domain || n.domain === "ai.onnx";
}

function describe(n: NodeProto): string {
  return n.name ? `${n.opType} node \`${n.name}\`` : `a ${n.opType} node`;
}

/** The input of a binary node that is not `via`. */
function otherInput(node: NodeProto, via: string): string {
  const inputs = node.input ?? [];
  if (inputs.length !== 2) {
    throw new VaeEncoderGraphError(`expected ${describe(node)} to have two inputs`);
  }
  return inputs[0] === via ? inputs[1] : inputs[0];
}

/**
 * Keeps the nodes that the graph outputs depend on, in their (topological)
 * order: one backward pass, since every producer comes before its consumers.
 */
function prune(nodes: NodeProto[], outputs: string[]): NodeProto[] {
  const needed = new Set(outputs);
  const keep = new Array<boolean>(nodes.length).fill(false);
  for (let i = nodes.length - 1; i >= 0; i--) {
    if ((nodes[i].output ?? []).some((o) => needed.has(o))) {
      keep[i] = true;
      for (const input of nodes[i].input ?? []) if (input) needed.add(input);
    }
  }
  return nodes.filter((_, i) => keep[i]);
}

/** Producers and consumers of the main graph's tensors. */
class GraphIndex {
  readonly produced = new Map<string, NodeProto>();
  readonly #consumers = new Map<string, NodeProto[]>();
  readonly #initializers: Set<string>;
  readonly #outputs: Set<string>;
  readonly #constant = new Map<string, boolean>();

  constructor(graph: onnx.onnx.IGraphProto) {
    this.#initializers = new Set((graph.initializer ?? []).map((t) => t.name!));
    this.#outputs = new Set((graph.output ?? []).map((o) => o.name!));
    for (const n of graph.node ?? []) {
      for (const o of n.output ?? []) this.produced.set(o, n);
      for (const i of n.input ?? []) {
        if (!i) continue;
        const list = this.#consumers.get(i) ?? [];
        list.push(n);
        this.#consumers.set(i, list);
      }
    }
  }

  isInitializer(name: string): boolean {
    return this.#initializers.has(name);
  }

  /** Whether `name` is a constant: an initializer, a Constant node, or computed from constants only. */
  isConstant(name: string): boolean {
    const known = this.#constant.get(name);
    if (known !== undefined) return known;
    this.#constant.set(name, false); // cycles never happen in a valid graph; be safe anyway
    let value = this.#initializers.has(name);
    if (!value) {
      const node = this.produced.get(name);
      value = node !== undefined &&
        (node.opType === "Constant" ||
          ((node.input ?? []).length > 0 &&
            (node.input ?? []).every((i) => !i || this.isConstant(i))));
    }
    this.#constant.set(name, value);
    return value;
  }

  /** The single consumer of `tensor`, looking past Cast/Identity; with the tensor it reads. */
  onlyConsumerPast(tensor: string, what: string): { node: NodeProto; via: string } {
    let via = tensor;
    for (;;) {
      const users = this.#consumers.get(via) ?? [];
      if (users.length !== 1) {
        throw new VaeEncoderGraphError(
          `expected ${what} to be used once, but ${users.length} nodes read it`,
        );
      }
      const next = users[0];
      if (!PASS_THROUGH.has(next.opType ?? "")) return { node: next, via };
      via = next.output![0];
    }
  }

  /** Whether `tensor` is the graph output `output`, or becomes it through Cast/Identity. */
  reaches(tensor: string, output: string): boolean {
    let at = tensor;
    for (;;) {
      if (at === output) return this.#outputs.has(output);
      const users = this.#consumers.get(at) ?? [];
      if (users.length !== 1 || !PASS_THROUGH.has(users[0].opType ?? "")) return false;
      at = users[0].output![0];
    }
  }

  /**
   * Walks from `tensor` (std or the mean) back through element-wise ops on
   * one non-constant input to the chunk op it was cut out of; returns that
   * op's data input.
   */
  chunkSource(tensor: string, what: string): { tensor: string; op: string } {
    let at = tensor;
    for (;;) {
      const node = this.produced.get(at);
      if (!node) {
        throw new VaeEncoderGraphError(
          `expected ${what} to be computed from a chunk of the distribution parameters, but ` +
            `\`${at}\` is a graph input or initializer`,
        );
      }
      const op = node.opType ?? "";
      if (CHUNK_OPS.has(op)) return { tensor: node.input![0], op };
      if (!ELEMENTWISE.has(op)) {
        throw new VaeEncoderGraphError(
          `expected ${what} to be computed from a chunk of the distribution parameters by ` +
            `clamp/scale/exp, but found ${describe(node)}`,
        );
      }
      const data = (node.input ?? []).filter((i) => i && !this.isConstant(i));
      if (data.length !== 1) {
        throw new VaeEncoderGraphError(
          `expected ${
            describe(node)
          } on the way to ${what} to have one non-constant input, got ${data.length}`,
        );
      }
      at = data[0];
    }
  }
}
