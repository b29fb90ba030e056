"""Writes img2img_reference.json: diffusers 0.25.0's own image-to-image code
run on a stub UNet and a stub VAE, per scheduler and strength, so the engine
can be held against it (mod/pipeline/image_to_image_reference_test.ts).

What runs is diffusers' code, not a restatement: the schedulers
(`diffusers.schedulers.*`, built with `from_config` from SD 1.5's scheduler
config as a user swaps them), `randn_tensor`, and — taken out of their files
with `ast` and executed, because the modules around them import
transformers and the model classes — `DiagonalGaussianDistribution`
(`models/autoencoders/vae.py`) and the pipelines' own `retrieve_latents`,
`get_timesteps`, `prepare_latents` and `retrieve_timesteps`
(`pipeline_stable_diffusion_img2img.py`,
`pipeline_latent_consistency_img2img.py`), the methods on a stand-in `self`. The
denoising loop is the pipelines' loop without CFG (the engine's CFG of a
UNet that ignores the text is the identity: u + g·(u − u) = u).

Stubs: the VAE's latent distribution parameters are a fixed [1, 8, 4, 4]
tensor (mean = sin, logvar = −3 + cos); the UNet predicts
`0.1 · sample + 0.001 · t` (float32 tensor ops, t as a Python float).

Provenance of the committed fixture: PyTorch 1.13.1 (Debian bookworm
python3-torch), NumPy 1.24, x86-64, diffusers v0.25.0 from a source
checkout:

    tmp=$(mktemp -d); git -C diffusers archive v0.25.0 src/diffusers | tar -x -C "$tmp"
    /usr/bin/python3 make_img2img_reference.py "$tmp/src"

The few modules diffusers imports at package level but never uses here
(huggingface_hub, tqdm, filelock, regex, packaging) are stubbed in a
temporary folder when they are missing (`bench/diffusers_offline.py`);
the package `__init__` is replaced
by one that defines only `__version__`, so no model class is imported.
Arrays are base64 of little-endian float32.
"""
import ast
import base64
import json
import os
import shutil
import sys
import tempfile
import typing

import numpy as np
import torch

SRC = os.path.abspath(sys.argv[1])
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "img2img_reference.json")

work = tempfile.mkdtemp(prefix="diffusers-ref-")
pkg = os.path.join(work, "diffusers")
shutil.copytree(os.path.join(SRC, "diffusers"), pkg)
with open(os.path.join(pkg, "__init__.py"), "w") as f:
    f.write('__version__ = "0.25.0"\n')
open(os.path.join(pkg, "schedulers", "__init__.py"), "w").close()
with open(os.path.join(pkg, "dependency_versions_check.py"), "w") as f:
    f.write("def dep_version_check(pkg, hint=None):\n    pass\n")


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench"))
import diffusers_offline  # noqa: E402
from diffusers_export import SD15_SCHEDULER as SD15  # noqa: E402

diffusers_offline.stub_missing(work)

import PIL.Image  # noqa: E402,F401
from diffusers.schedulers.scheduling_ddim import DDIMScheduler  # noqa: E402
from diffusers.schedulers.scheduling_dpmsolver_multistep import (  # noqa: E402
    DPMSolverMultistepScheduler,
)
from diffusers.schedulers.scheduling_euler_ancestral_discrete import (  # noqa: E402
    EulerAncestralDiscreteScheduler,
)
from diffusers.schedulers.scheduling_euler_discrete import EulerDiscreteScheduler  # noqa: E402
from diffusers.schedulers.scheduling_lcm import LCMScheduler  # noqa: E402
from diffusers.schedulers.scheduling_pndm import PNDMScheduler  # noqa: E402
from diffusers.utils import deprecate  # noqa: E402
from diffusers.utils.torch_utils import randn_tensor  # noqa: E402


def extract(path, names, cls=None):
    """Executes the named functions (or methods of `cls`) of a diffusers file; returns them."""
    tree = ast.parse(open(path).read())
    body = tree.body
    if cls:
        body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls).body
    scope = {
        "torch": torch,
        "PIL": PIL,
        "randn_tensor": randn_tensor,
        "deprecate": deprecate,
        "inspect": __import__("inspect"),
        "Optional": typing.Optional,
        "List": typing.List,
        "Union": typing.Union,
        "Tuple": typing.Tuple,
        "logger": None,
    }
    found = {}
    for node in body:
        if isinstance(node, ast.ClassDef) and node.name in names:
            node.decorator_list = []
            exec(compile(ast.Module([node], []), path, "exec"), scope)
            found[node.name] = scope[node.name]
        if isinstance(node, ast.FunctionDef) and node.name in names:
            node.decorator_list = []
            for arg in node.args.args + node.args.kwonlyargs:
                arg.annotation = None
            node.returns = None
            exec(compile(ast.Module([node], []), path, "exec"), scope)
            found[node.name] = scope[node.name]
    scope.update(found)
    return found


DiagonalGaussianDistribution = extract(
    os.path.join(pkg, "models", "autoencoders", "vae.py"), {"DiagonalGaussianDistribution"}
)["DiagonalGaussianDistribution"]
PIPES = os.path.join(pkg, "pipelines")
SD = os.path.join(PIPES, "stable_diffusion", "pipeline_stable_diffusion_img2img.py")
LCM = os.path.join(PIPES, "latent_consistency_models", "pipeline_latent_consistency_img2img.py")
sd_fns = extract(SD, {"retrieve_latents", "retrieve_timesteps"})
sd_methods = extract(SD, {"get_timesteps", "prepare_latents"}, "StableDiffusionImg2ImgPipeline")
lcm_fns = extract(LCM, {"retrieve_timesteps"})
for fn in sd_methods.values():
    fn.__globals__["retrieve_latents"] = sd_fns["retrieve_latents"]

H = W = 4
params = torch.zeros(1, 8, H, W)
n = 4 * H * W
for i in range(n):
    params.view(-1)[i] = float(np.sin(0.37 * i))
    params.view(-1)[n + i] = float(-3 + np.cos(0.21 * i))


class Latents:
    def __init__(self):
        self.latent_dist = DiagonalGaussianDistribution(params)


class Vae:
    class config:
        scaling_factor = 0.18215

    def encode(self, image):
        return Latents()


class Pipe:
    def __init__(self, scheduler):
        self.scheduler = scheduler
        self.vae = Vae()


def unet(sample, t):
    return sample * 0.1 + 0.001 * float(t)


def b64(a):
    return base64.b64encode(np.asarray(a, dtype="<f4").tobytes()).decode()


SCHEDULERS = {
    "pndm": lambda: PNDMScheduler.from_config(SD15),
    "ddim": lambda: DDIMScheduler.from_config(SD15),
    "euler": lambda: EulerDiscreteScheduler.from_config(SD15),
    "euler_a": lambda: EulerAncestralDiscreteScheduler.from_config(SD15),
    "dpmpp_2m": lambda: DPMSolverMultistepScheduler.from_config(SD15),
    "dpmpp_2m_karras": lambda: DPMSolverMultistepScheduler.from_config(SD15, use_karras_sigmas=True),
    "lcm": lambda: LCMScheduler.from_config(SD15),
}
STEPS = 6
SEED = 7
image = torch.zeros(1, 3, 8 * H, 8 * W)
cases = []
for name, make in SCHEDULERS.items():
    for strength in (0.3, 0.75, 1.0):
        pipelines = ["stable_diffusion"] + (["latent_consistency"] if name == "lcm" else [])
        for pipeline in pipelines:
            scheduler = make()
            pipe = Pipe(scheduler)
            generator = torch.Generator().manual_seed(SEED)
            if pipeline == "stable_diffusion":
                timesteps, _ = sd_fns["retrieve_timesteps"](scheduler, STEPS, torch.device("cpu"), None)
                timesteps, _ = sd_methods["get_timesteps"](pipe, STEPS, strength, torch.device("cpu"))
            else:
                timesteps, _ = lcm_fns["retrieve_timesteps"](
                    scheduler, STEPS, torch.device("cpu"), None, original_inference_steps=None, strength=strength
                )
            if len(timesteps) == 0:
                continue
            latent_timestep = timesteps[:1].repeat(1)
            latents = sd_methods["prepare_latents"](
                pipe, image, latent_timestep, 1, 1, torch.float32, torch.device("cpu"), generator
            )
            start = latents.clone()
            first_input = None
            denoised = None
            accepts_eta = "eta" in __import__("inspect").signature(scheduler.step).parameters
            extra = {"generator": generator} if "generator" in __import__("inspect").signature(
                scheduler.step
            ).parameters else {}
            if accepts_eta:
                extra["eta"] = 0.0
            for t in timesteps:
                model_input = scheduler.scale_model_input(latents, t)
                if first_input is None:
                    first_input = model_input.clone()
                out = scheduler.step(unet(model_input, t), t, latents, **extra, return_dict=False)
                latents = out[0]
                if name == "lcm":
                    denoised = out[1]
            final = denoised if pipeline == "latent_consistency" else latents
            cases.append(
                {
                    "scheduler": name,
                    "pipeline": pipeline,
                    "strength": strength,
                    "timesteps": [float(t) for t in timesteps],
                    "start": b64(start.numpy()),
                    "firstInput": b64(first_input.numpy()),
                    "final": b64(final.numpy()),
                    "decoderInput": b64((final / 0.18215).numpy()),
                }
            )

json.dump(
    {
        "torch_version": torch.__version__,
        "diffusers_version": "0.25.0",
        "steps": STEPS,
        "seed": SEED,
        "latent": [1, 4, H, W],
        "params": b64(params.numpy()),
        "cases": cases,
    },
    open(OUT, "w"),
    indent=1,
)
shutil.rmtree(work)
print(f"wrote {len(cases)} cases to {OUT}")
