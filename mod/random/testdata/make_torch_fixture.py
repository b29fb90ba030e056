"""Writes torch_randn_fixture.json: reference outputs of real PyTorch CPU RNG.

Provenance of the committed fixture: PyTorch 1.13.1 (Debian bookworm package
python3-torch 1.13.1+dfsg-4, GCC 12.2 build), x86-64. Run twice, once per CPU
kernel, and merged:

    ATEN_CPU_CAPABILITY=default python3 make_torch_fixture.py default
    ATEN_CPU_CAPABILITY=avx2    python3 make_torch_fixture.py avx2

"default" runs the scalar `normal_fill` with glibc logf/cosf/sinf (what ARM
builds run); "avx2" runs `normal_fill_AVX2` with the avx_mathfun.h polynomials
(what every AVX2 or AVX-512 x86-64 machine runs: normal_stub has no AVX-512
kernel).
Values are float32 arrays stored as base64 of their little-endian bytes.
"""
import base64
import json
import os
import sys

import torch

kernel = sys.argv[1]
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_randn_fixture.json")
data = json.load(open(path)) if os.path.exists(path) else {}
if os.environ.get("ATEN_CPU_CAPABILITY") != kernel:
    sys.exit(f"set ATEN_CPU_CAPABILITY={kernel} so torch runs the {kernel} kernel")


def f32(t):
    return t.reshape(-1).contiguous()


def b64(t):
    return base64.b64encode(t.numpy().astype("<f4").tobytes()).decode()


cases = []
# Single calls on a fresh generator, spanning both kernels and the tail path.
for seed in [0, 42, 1234, 4294967295]:
    for shape in [[1], [4], [7], [15], [16], [17], [25], [31], [33], [100], [2, 3, 4, 4]]:
        g = torch.Generator("cpu").manual_seed(seed)
        cases.append({"seed": seed, "calls": [{"op": "randn", "count": int(torch.Size(shape).numel()),
                                               "values": b64(f32(torch.randn(shape, generator=g)))}]})
# Seeds outside 0..2^32-1 (torch keeps the low 32 bits; negatives wrap).
for seed in [-1, 2**32 + 5, 2**63 + 7]:
    g = torch.Generator("cpu").manual_seed(seed)
    cases.append({"seed": str(seed), "calls": [{"op": "randn", "count": 20,
                                                "values": b64(f32(torch.randn(20, generator=g)))}]})
# One generator, successive calls: the cached Box-Muller value carries over
# between scalar calls; vector calls do not touch it.
g = torch.Generator("cpu").manual_seed(7)
calls = []
for op, n in [("randn", 7), ("randn", 7), ("randn", 20), ("randn", 3), ("rand", 5), ("randn", 1),
              ("randn", 1), ("rand", 20), ("randn", 16)]:
    fn = torch.randn if op == "randn" else torch.rand
    calls.append({"op": op, "count": n, "values": b64(f32(fn(n, generator=g)))})
cases.append({"seed": 7, "calls": calls})
# SD1.5 latents (1x4x64x64, 1x4x48x64) then per-step noise of the same size on
# the same generator, as diffusers' ancestral schedulers draw it; sampled
# every 61st element to keep the file small.
for seed, shape in [(0, [1, 4, 64, 64]), (3000000000, [1, 4, 48, 64])]:
    g = torch.Generator("cpu").manual_seed(seed)
    calls = []
    for _ in range(3):
        v = f32(torch.randn(shape, generator=g))
        calls.append({"op": "randn", "count": v.numel(), "stride": 61, "values": b64(v[::61].contiguous())})
    cases.append({"seed": seed, "calls": calls})

data["torch_version"] = torch.__version__
data[kernel] = cases
with open(path, "w") as f:
    json.dump(data, f, separators=(",", ":"))
    f.write("\n")
