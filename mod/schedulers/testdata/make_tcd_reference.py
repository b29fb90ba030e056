"""Writes tcd_reference.json: diffusers v0.27.2's own `TCDScheduler`
(`src/diffusers/schedulers/scheduling_tcd.py`, the first releases with it
are v0.27.x) run on PyTorch, so `tcd_test.ts` holds mod/schedulers/tcd.ts
against it.

What is recorded:

- `schedules`: `set_timesteps(N, original_inference_steps=…, strength=…)`
  on schedulers built with `TCDScheduler.from_config(SD15)` (SD 1.5's
  published PNDM config, as the Hyper-SD and diffusers examples build it)
  and on variants of that config (`timestep_spacing`, `steps_offset`,
  `original_inference_steps`), the resulting timesteps or the error raised;
- `loops`: a whole sampling loop as `StableDiffusionPipeline.__call__`
  runs it with guidance 0: `latents = randn_tensor(shape, generator)`,
  then per timestep `step(unet(latents, t), t, latents, eta=eta,
  generator=generator)`, with every step's `prev_sample` and
  `pred_noised_sample`; the UNet is a stub, `0.1 · sample + 0.001 · t`
  (float32 tensor ops, t as a Python float), as in the image-to-image
  reference;
- `img2img`: `set_timesteps(N, strength=…)`, `add_noise` of fixed latents at
  the first timestep with the generator's noise, then the loop.

Provenance of the committed fixture: PyTorch 1.13 (Debian bookworm
python3-torch, `torch.__version__` is recorded), NumPy 1.24, an AVX-512
x86-64 machine (recorded as `cpu_kernel`), diffusers v0.27.2 from a source
checkout. There torch draws `randn` with its AVX2 `normal_fill` (what
`TorchGenerator` reproduces bit for bit) and builds the betas with its
vectorised `linspace`, whose `alphas_cumprod` differ from the portable
kernel's (the project's, `betas.ts`) in the last float32 bit at 682 of the
1000 timesteps (`torch_betas_fixture.json`), so the test allows float32
rounding rather than asking for equal bits:

    tmp=$(mktemp -d); git -C diffusers archive v0.27.2 src/diffusers | tar -x -C "$tmp"
    /usr/bin/python3 make_tcd_reference.py "$tmp/src" && deno fmt tcd_reference.json

The modules diffusers imports at package level but never uses here are
stubbed in a temporary folder when they are missing
(`bench/diffusers_offline.py`), and the package `__init__` is replaced by
one that defines only `__version__`. Arrays are base64 of little-endian
float32.
"""
import base64
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch

SRC = os.path.abspath(sys.argv[1])
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tcd_reference.json")
VERSION = "0.27.2"

work = tempfile.mkdtemp(prefix="diffusers-tcd-")
pkg = os.path.join(work, "diffusers")
shutil.copytree(os.path.join(SRC, "diffusers"), pkg)
with open(os.path.join(pkg, "__init__.py"), "w") as f:
    f.write(f'__version__ = "{VERSION}"\n')
open(os.path.join(pkg, "schedulers", "__init__.py"), "w").close()
with open(os.path.join(pkg, "dependency_versions_check.py"), "w") as f:
    f.write("def dep_version_check(pkg, hint=None):\n    pass\n")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench"))
import diffusers_offline  # noqa: E402
from diffusers_export import SD15_SCHEDULER as SD15  # noqa: E402

diffusers_offline.stub_missing(work)

from diffusers.schedulers.scheduling_tcd import TCDScheduler  # noqa: E402
from diffusers.utils.torch_utils import randn_tensor  # noqa: E402


def b64(a):
    return base64.b64encode(np.asarray(a, dtype="<f4").tobytes()).decode()


def make(extra):
    return TCDScheduler.from_config({**SD15, **extra})


schedules = []
for extra in ({}, {"timestep_spacing": "trailing"}, {"timestep_spacing": "linspace", "steps_offset": 0},
              {"original_inference_steps": 20}, {"original_inference_steps": 1000}):
    for orig in (None, 50, 20):
        for strength in (1.0, 0.75, 0.5, 0.3, 0.05):
            for n in (1, 2, 3, 4, 8, 12, 30, 51):
                s = make(extra)
                case = {"config": extra, "original_inference_steps": orig, "strength": strength, "steps": n}
                try:
                    s.set_timesteps(n, original_inference_steps=orig, strength=strength)
                    case["timesteps"] = [int(t) for t in s.timesteps]
                except ValueError as e:
                    case["error"] = str(e).split(":")[0]
                schedules.append(case)

H = W = 8
SHAPE = (1, 4, H, W)


def unet(sample, t):
    return sample * 0.1 + 0.001 * float(t)


def run_loop(scheduler, latents, timesteps, eta, generator):
    steps = []
    for t in timesteps:
        out = scheduler.step(unet(latents, t), t, latents, eta=eta, generator=generator, return_dict=False)
        latents = out[0]
        steps.append({"t": int(t), "prev": b64(out[0].numpy()), "noised": b64(out[1].numpy())})
    return latents, steps


loops = []
for prediction in ("epsilon", "v_prediction"):
    for n in (1, 2, 4):
        for eta in (0.0, 0.3, 1.0):
            scheduler = make({"prediction_type": prediction})
            scheduler.set_timesteps(n)
            generator = torch.Generator().manual_seed(1234)
            latents = randn_tensor(SHAPE, generator=generator, dtype=torch.float32)
            start = latents.clone()
            final, steps = run_loop(scheduler, latents, scheduler.timesteps, eta, generator)
            loops.append({
                "prediction_type": prediction,
                "steps": n,
                "eta": eta,
                "seed": 1234,
                "timesteps": [int(t) for t in scheduler.timesteps],
                "start": b64(start.numpy()),
                "per_step": steps,
                "final": b64(final.numpy()),
            })

img2img = []
image_latents = torch.zeros(SHAPE)
for i in range(image_latents.numel()):
    image_latents.view(-1)[i] = float(np.sin(0.37 * i))
for n, strength, eta in ((1, 0.3, 1.0), (2, 0.5, 1.0), (4, 0.75, 0.3)):
    scheduler = make({})
    scheduler.set_timesteps(n, strength=strength)
    generator = torch.Generator().manual_seed(99)
    noise = randn_tensor(SHAPE, generator=generator, dtype=torch.float32)
    latents = scheduler.add_noise(image_latents, noise, scheduler.timesteps[:1])
    start = latents.clone()
    final, steps = run_loop(scheduler, latents, scheduler.timesteps, eta, generator)
    img2img.append({
        "steps": n,
        "strength": strength,
        "eta": eta,
        "seed": 99,
        "timesteps": [int(t) for t in scheduler.timesteps],
        "start": b64(start.numpy()),
        "per_step": steps,
        "final": b64(final.numpy()),
    })

flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
data = {
    "torch_version": torch.__version__,
    "cpu_kernel": os.environ.get("ATEN_CPU_CAPABILITY")
    or ("avx512" if " avx512f" in flags else "avx2" if " avx2" in flags else "default"),
    "diffusers_version": VERSION,
    "config": SD15,
    "latent": list(SHAPE),
    "image_latents": b64(image_latents.numpy()),
    "schedules": schedules,
    "loops": loops,
    "img2img": img2img,
}
with open(OUT, "w") as f:
    json.dump(data, f, indent=2)
    f.write("\n")
shutil.rmtree(work)
print(f"wrote {len(schedules)} schedules, {len(loops)} loops, {len(img2img)} img2img runs to {OUT}")
