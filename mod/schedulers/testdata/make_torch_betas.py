"""Writes torch_betas_fixture.json: diffusers' beta / alphas_cumprod / sigma
tables as real PyTorch computes them (float32 tensors, as in every diffusers
scheduler __init__), for the SD 1.5 config (scaled_linear 0.00085..0.012, T=1000)
and the diffusers class default (linear 1e-4..0.02).

Provenance of the committed fixture: PyTorch 1.13.1 (Debian bookworm
python3-torch 1.13.1+dfsg-4, GCC 12.2 build) with NumPy 1.24, x86-64, run once
per CPU kernel and merged:

    for k in default avx2 avx512; do ATEN_CPU_CAPABILITY=$k python3 make_torch_betas.py $k; done

Arrays are base64 of little-endian float32.
"""
import base64
import json
import os
import sys

import numpy as np
import torch

kernel = sys.argv[1]
if os.environ.get("ATEN_CPU_CAPABILITY") != kernel:
    sys.exit(f"set ATEN_CPU_CAPABILITY={kernel} so torch runs the {kernel} kernel")
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_betas_fixture.json")
data = json.load(open(path)) if os.path.exists(path) else {}


def b64(a):
    return base64.b64encode(np.asarray(a, dtype="<f4").tobytes()).decode()


scaled = torch.linspace(0.00085**0.5, 0.012**0.5, 1000, dtype=torch.float32) ** 2
linear = torch.linspace(0.0001, 0.02, 1000, dtype=torch.float32)
ac = torch.cumprod(1.0 - scaled, dim=0)
# EulerDiscreteScheduler / DPMSolverMultistepScheduler: sigmas and np.log(sigmas)
sigmas = np.array(((1 - ac) / ac) ** 0.5)
data["torch_version"] = torch.__version__
tables = {
    "scaled_linear_betas": b64(scaled.numpy()),
    "linear_betas": b64(linear.numpy()),
    "alphas_cumprod": b64(ac.numpy()),
    "linear_alphas_cumprod": b64(torch.cumprod(1.0 - linear, dim=0).numpy()),
    "sigmas": b64(sigmas),
    "log_sigmas": b64(np.log(sigmas)),
}
# The vector kernels differ only in float rounding; keep their two key tables.
data[kernel] = tables if kernel == "default" else {
    k: tables[k] for k in ("scaled_linear_betas", "alphas_cumprod")}
with open(path, "w") as f:
    json.dump(data, f, indent=1)
    f.write("\n")
