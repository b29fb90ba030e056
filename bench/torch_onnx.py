"""Runs an ONNX graph exported by torch_export.ts in PyTorch and times it.

The torch side of `deno task bench:gpu --torch PYTHON`: the same graph, the
same weights (read from the model's own files) and the same inputs as ONNX
Runtime, so the two runtimes are compared on one random-weight UNet. Each
ONNX node becomes the PyTorch call with its semantics (operator definitions:
onnx/docs/Operators.md); only the operators the project's SD 1.5 builders
emit are supported, and an unknown one stops the run with its name.

    python3 torch_onnx.py GRAPH_JSON --device cuda --runs 5 --out RESULT_JSON

Writes RESULT_JSON: {"device", "torch", "dtype", "ms": [...], "peak_mib",
"outputs": {name: {"dims", "file"}}} with each output's values as
little-endian float32 in the named file. Needs torch and numpy only.
"""

import argparse
import base64
import json
import os
import time

import numpy as np
import torch
import torch.nn.functional as F

NP = {
    "float32": np.float32,
    "float16": np.float16,
    "float64": np.float64,
    "int64": np.int64,
    "int32": np.int32,
    "bool": np.bool_,
}
# ONNX TensorProto.DataType → torch dtype, for Cast.
ONNX_TO_TORCH = {
    1: torch.float32,
    6: torch.int32,
    7: torch.int64,
    9: torch.bool,
    10: torch.float16,
    11: torch.float64,
}


def load(ref, device):
    """One tensor from a reference of graph.json."""
    dtype = NP[ref["dtype"]]
    if "base64" in ref:
        raw = base64.b64decode(ref["base64"])
        array = np.frombuffer(raw, dtype=dtype).copy()
    else:
        count = ref["length"] // np.dtype(dtype).itemsize
        array = np.fromfile(ref["file"], dtype=dtype, count=count, offset=ref["offset"])
    return torch.from_numpy(array.reshape(ref["dims"])).to(device)


def ints(t):
    return [int(v) for v in t.reshape(-1).tolist()]


def conv(x, w, b, a):
    pads = a.get("pads", [0, 0, 0, 0])
    if pads[0] != pads[2] or pads[1] != pads[3]:
        x = F.pad(x, (pads[1], pads[3], pads[0], pads[2]))
        pads = [0, 0, 0, 0]
    return F.conv2d(
        x,
        w,
        b,
        stride=a.get("strides", [1, 1]),
        padding=(pads[0], pads[1]),
        dilation=a.get("dilations", [1, 1]),
        groups=a.get("group", 1),
    )


def resize(x, roi, scales, sizes, a):
    mode = a.get("mode", "nearest")
    coord = a.get("coordinate_transformation_mode", "half_pixel")
    if sizes is not None and sizes.numel() > 0:
        size = ints(sizes)[2:]
    else:
        size = [int(round(d * s)) for d, s in zip(x.shape[2:], scales.tolist()[2:])]
    if mode == "nearest":
        # asymmetric + floor is torch's "nearest" (the builders' only nearest variant).
        if coord != "asymmetric" or a.get("nearest_mode", "round_prefer_floor") != "floor":
            raise ValueError(f"Resize nearest with {coord}/{a.get('nearest_mode')} is not supported")
        return F.interpolate(x, size=size, mode="nearest")
    if mode == "linear" and coord == "half_pixel":
        return F.interpolate(x, size=size, mode="bilinear", align_corners=False)
    raise ValueError(f"Resize {mode}/{coord} is not supported")


def run_node(op, a, ins):
    """The outputs of one ONNX node (a list)."""
    x = ins[0] if ins else None
    if op in ("Add", "Sub", "Mul", "Div", "Pow"):
        y = ins[1]
        return [{"Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div,
                 "Pow": torch.pow}[op](x, y)]
    if op == "MatMul":
        return [torch.matmul(x, ins[1])]
    if op == "Gemm":
        y = torch.matmul(x.t() if a.get("transA") else x, ins[1].t() if a.get("transB") else ins[1])
        y = y * a.get("alpha", 1.0)
        return [y + a.get("beta", 1.0) * ins[2] if len(ins) > 2 and ins[2] is not None else y]
    if op == "Conv":
        return [conv(x, ins[1], ins[2] if len(ins) > 2 else None, a)]
    if op == "Sigmoid":
        return [torch.sigmoid(x)]
    if op == "Tanh":
        return [torch.tanh(x)]
    if op == "Erf":
        return [torch.erf(x)]
    if op == "Sin":
        return [torch.sin(x)]
    if op == "Cos":
        return [torch.cos(x)]
    if op == "Exp":
        return [torch.exp(x)]
    if op == "Sqrt":
        return [torch.sqrt(x)]
    if op == "Neg":
        return [torch.neg(x)]
    if op == "Identity":
        return [x]
    if op == "Softmax":
        return [torch.softmax(x, dim=a.get("axis", -1))]
    if op == "Transpose":
        perm = a.get("perm", list(reversed(range(x.dim()))))
        return [x.permute(*perm)]
    if op == "Reshape":
        shape = ints(ins[1])
        shape = [x.shape[i] if s == 0 and not a.get("allowzero") else s for i, s in enumerate(shape)]
        return [x.reshape(shape)]
    if op == "Shape":
        dims = list(x.shape)[a.get("start", 0):a.get("end", None)]
        return [torch.tensor(dims, dtype=torch.int64, device=x.device)]
    if op == "Unsqueeze":
        axes = ints(ins[1]) if len(ins) > 1 else a["axes"]
        y = x
        for ax in sorted(ax if ax >= 0 else ax + x.dim() + len(axes) for ax in axes):
            y = y.unsqueeze(ax)
        return [y]
    if op == "Squeeze":
        axes = ints(ins[1]) if len(ins) > 1 and ins[1] is not None else a.get("axes")
        if axes is None:
            return [x.squeeze()]
        keep = [d for i, d in enumerate(x.shape) if i not in {ax % x.dim() for ax in axes}]
        return [x.reshape(keep)]
    if op == "Concat":
        return [torch.cat([t for t in ins], dim=a["axis"])]
    if op == "Split":
        axis = a.get("axis", 0)
        if len(ins) > 1 and ins[1] is not None:
            return list(torch.split(x, ints(ins[1]), dim=axis))
        n = a["num_outputs"]
        return list(torch.chunk(x, n, dim=axis))
    if op == "Slice":
        starts, ends = ints(ins[1]), ints(ins[2])
        axes = ints(ins[3]) if len(ins) > 3 and ins[3] is not None else list(range(len(starts)))
        steps = ints(ins[4]) if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
        index = [slice(None)] * x.dim()
        for s, e, ax, st in zip(starts, ends, axes, steps):
            size = x.shape[ax]
            e = min(e, size) if e >= 0 else e + size
            index[ax] = slice(s if s >= 0 else s + size, e, st)
        return [x[tuple(index)]]
    if op == "Gather":
        axis = a.get("axis", 0)
        idx = ins[1].long()
        return [torch.index_select(x, axis, idx.reshape(-1)).reshape(
            list(x.shape[:axis]) + list(idx.shape) + list(x.shape[axis + 1:]))]
    if op == "Cast":
        return [x.to(ONNX_TO_TORCH[a["to"]])]
    if op == "InstanceNormalization":
        return [F.instance_norm(x, weight=ins[1], bias=ins[2], eps=a.get("epsilon", 1e-5))]
    if op == "LayerNormalization":
        axis = a.get("axis", -1)
        axis = axis if axis >= 0 else axis + x.dim()
        return [F.layer_norm(x, x.shape[axis:], ins[1], ins[2] if len(ins) > 2 else None,
                             eps=a.get("epsilon", 1e-5))]
    if op == "ReduceMean":
        axes = ints(ins[1]) if len(ins) > 1 else a.get("axes")
        return [torch.mean(x, dim=axes, keepdim=bool(a.get("keepdims", 1)))]
    if op == "Resize":
        return [resize(x, ins[1] if len(ins) > 1 else None, ins[2] if len(ins) > 2 else None,
                       ins[3] if len(ins) > 3 else None, a)]
    raise ValueError(f"ONNX operator {op} is not supported by torch_onnx.py")


def run_graph(graph, values):
    """Evaluates every node in order (ONNX graphs are topologically sorted)."""
    env = dict(values)
    for node in graph["nodes"]:
        ins = [env[n] if n else None for n in node["inputs"]]
        outs = run_node(node["op"], node["attrs"], ins)
        for name, v in zip(node["outputs"], outs):
            env[name] = v
    return {name: env[name] for name in graph["outputs"]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("graph")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    with open(args.graph) as f:
        graph = json.load(f)
    device = torch.device(args.device)
    values = {t["name"]: load(t, device) for t in graph["initializers"]}
    values.update({t["name"]: load(t, device) for t in graph["feeds"]})
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    ms = []
    with torch.no_grad():
        for i in range(args.warmup + args.runs):
            sync()
            t0 = time.perf_counter()
            out = run_graph(graph, values)
            sync()
            if i >= args.warmup:
                ms.append((time.perf_counter() - t0) * 1000)
    peak = torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else None
    base = os.path.splitext(args.out)[0]
    outputs = {}
    for name, v in out.items():
        path = f"{base}.{name}.f32"
        v.detach().to("cpu", torch.float32).numpy().astype("<f4").tofile(path)
        outputs[name] = {"dims": list(v.shape), "file": path}
    dtype = str(next(iter(out.values())).dtype).replace("torch.", "")
    with open(args.out, "w") as f:
        json.dump({"device": str(device), "torch": torch.__version__, "dtype": dtype,
                   "ms": ms, "peak_mib": peak, "outputs": outputs}, f)


if __name__ == "__main__":
    main()
