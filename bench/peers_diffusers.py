"""The diffusers side of `deno task bench --full --only peers`: diffusers'
own `StableDiffusionPipeline` from a source checkout, in PyTorch on the CPU,
on the bench's random-weight SD 1.5 (`sd15_torch.py`, the weights of the
project's ONNX export), as the project's preset runs it: the LoRA fused into
the UNet, the LCM or TCD scheduler, no classifier-free guidance, TAESD
(`AutoencoderTiny`) as the VAE.

    /usr/bin/python3 bench/peers_diffusers.py DIFFUSERS_SRC --export DIR --taesd FILE --lora FILE \
        --ids 49406,320,... --scheduler lcm --steps 4 --images 3 --threads 2

Writes JSON lines to stdout: {"event": "ready"} once the pipeline is built
(the export's weights built again from its seed, `sd15_torch.py`, and
checked against the export's files, which `checkMs` took; the LoRA fused),
then one {"event": "image", "ms",
"unetMs": [...], "cpuMs"} per image (`unetMs`: each UNet forward, timed
around the module's call; `cpuMs`: this process's CPU time during the image,
all threads), then {"event": "done", "torch", "threads"}.

Differences from a user's script, none of which changes what is computed per
step: transformers is not installable offline, so the text encoder is
`sd15_torch`'s restatement of transformers' `CLIPTextModel`, the tokenizer a
stand-in returning the project tokenizer's ids for the prompt (`--ids`), and
the pipeline's module gets stand-ins for the transformers class names it
imports (`transformers_stand_in`);
the LoRA is fused here (W += alpha / rank · up · down, what `fuse_lora` does
at scale 1) because diffusers' loader needs the `safetensors` and `peft`
packages; the safety checker is off (the project has none).
"""
import argparse
import json
import os
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np  # noqa: E402
import sd15_torch  # noqa: E402

T0 = time.perf_counter()


def emit(event, **fields):
    print(json.dumps({"event": event, "t": time.perf_counter() - T0, **fields}), flush=True)


def tqdm_stand_in():
    """A silent `tqdm` with what diffusers' progress bars call, when tqdm is not installed."""
    try:
        import tqdm  # noqa: F401

        return
    except ImportError:
        pass

    class Tqdm:
        def __init__(self, iterable=None, *a, **k):
            self.iterable = iterable

        def __iter__(self):
            return iter(self.iterable)

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def update(self, *a, **k):
            pass

        def close(self):
            pass

    module = types.ModuleType("tqdm")
    module.tqdm = Tqdm
    auto = types.ModuleType("tqdm.auto")
    auto.tqdm = Tqdm
    module.auto = auto
    sys.modules["tqdm"] = module
    sys.modules["tqdm.auto"] = auto


def transformers_stand_in():
    """Lets diffusers' own `StableDiffusionPipeline` be imported without transformers. The
    package then exports a placeholder that refuses to be built, and the pipeline's module
    imports transformers' class names (type hints, the safety checker's base class) and loader
    mixins that diffusers offers only with transformers: stand-ins for those names, and the
    package told transformers is there, before anything imports `diffusers.loaders`."""
    try:
        import transformers  # noqa: F401

        return
    except ImportError:
        pass
    import importlib.abc
    import importlib.machinery

    from diffusers.utils import import_utils

    import_utils._transformers_available = True
    import_utils._transformers_version = "4.36.0"

    def names(module):
        def attribute(name):
            if name.startswith("__"):
                raise AttributeError(name)
            # Constants (weights file names) are strings; everything else a class.
            value = name if name.isupper() else type(name, (), {})
            setattr(module, name, value)
            return value

        return attribute

    class StandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, fullname, path=None, target=None):
            if fullname == "transformers" or fullname.startswith("transformers."):
                return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
            return None

        def create_module(self, spec):
            module = types.ModuleType(spec.name)
            module.__path__ = []
            module.__version__ = "4.36.0"
            module.__getattr__ = names(module)
            return module

        def exec_module(self, module):
            pass

    sys.meta_path.insert(0, StandIns())


class Tokenizer:
    """Stands in for `CLIPTokenizer`: the prompt's ids as the project's tokenizer gives them."""

    model_max_length = 77
    added_tokens_encoder = {}

    def __init__(self, ids):
        self.ids = ids

    def tokenize(self, prompt):
        return prompt.split()

    def __call__(self, prompt, padding=None, max_length=None, truncation=None, return_tensors=None):
        prompts = [prompt] if isinstance(prompt, str) else prompt
        ids = self.ids[: self.model_max_length]
        if padding == "max_length":
            ids = ids + [ids[-1]] * (self.model_max_length - len(ids))
        return types.SimpleNamespace(input_ids=torch.tensor([ids] * len(prompts)), attention_mask=None)


class TextEncoder(torch.nn.Module):
    """The restated CLIP text model with the attributes the pipeline reads."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.config = types.SimpleNamespace(use_attention_mask=False)

    @property
    def dtype(self):
        return next(self.parameters()).dtype

    @property
    def device(self):
        # The pipeline's `device` asks the first module of a set of names, so in an order that
        # changes with Python's string hashing: sometimes this one (transformers' models have it).
        return next(self.parameters()).device

    def forward(self, input_ids, attention_mask=None):
        return self.model(input_ids)


def fuse_lora(unet, path):
    """Adds each kohya-named LoRA pair to its module's weight: W += alpha / rank · up · down."""
    tensors = safetensors_np.read(path)
    modules = {"lora_unet_" + name.replace(".", "_"): m for name, m in unet.named_modules()}
    fused = 0
    with torch.no_grad():
        for key in [k for k in tensors if k.endswith(".lora_down.weight")]:
            base = key[: -len(".lora_down.weight")]
            module = modules.get(base)
            if module is None:
                raise SystemExit(f"LoRA key {base} names no module of the UNet")
            down = torch.from_numpy(tensors[key].astype(np.float32))
            up = torch.from_numpy(tensors[base + ".lora_up.weight"].astype(np.float32))
            rank = down.shape[0]
            alpha = float(tensors[base + ".alpha"]) if base + ".alpha" in tensors else rank
            delta = (up.flatten(1) @ down.flatten(1)).reshape(module.weight.shape)
            module.weight += (alpha / rank) * delta
            fused += 1
    return fused


def main():
    p = argparse.ArgumentParser()
    p.add_argument("src")
    p.add_argument("--export", required=True)
    p.add_argument("--taesd", required=True)
    p.add_argument("--lora", required=True)
    p.add_argument("--ids", required=True)
    p.add_argument("--scheduler", choices=["lcm", "tcd"], default="lcm")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--guidance", type=float, default=1.0)
    p.add_argument("--eta", type=float, default=0.3)
    p.add_argument("--images", type=int, default=3)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--size", type=int, default=512)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--prompt", default="a lighthouse")
    args = p.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    tqdm_stand_in()
    sd15_torch.import_diffusers(args.src, tempfile.mkdtemp(prefix="peers-diffusers-"))
    transformers_stand_in()
    from diffusers import AutoencoderTiny, LCMScheduler, TCDScheduler
    from diffusers.pipelines.stable_diffusion.pipeline_stable_diffusion import StableDiffusionPipeline

    # First, before anything else draws from torch's generator: the export's weights.
    models = sd15_torch.build({"text_encoder", "unet"}, args.export)
    unet, text = models["unet"], TextEncoder(models["text_encoder"]).eval()
    del models
    t = time.perf_counter()
    checked = {
        "unet": sd15_torch.check_against_export(unet, Path(args.export) / "unet" / "model.onnx"),
        "text_encoder": sd15_torch.check_against_export(
            text.model, Path(args.export) / "text_encoder" / "model.onnx"),
    }
    check_ms = (time.perf_counter() - t) * 1000
    with torch.no_grad():
        fused = fuse_lora(unet, args.lora)
        vae = AutoencoderTiny()
        vae.load_state_dict({k: torch.from_numpy(v) for k, v in safetensors_np.read(args.taesd).items()})
        vae.eval()
    # SD 1.5's scheduler_config.json, under the scheduler the preset samples with.
    config = dict(num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012,
                  beta_schedule="scaled_linear", set_alpha_to_one=False, steps_offset=1,
                  clip_sample=False)
    scheduler = (LCMScheduler if args.scheduler == "lcm" else TCDScheduler)(**config)
    pipe = StableDiffusionPipeline(vae=vae, text_encoder=text, tokenizer=Tokenizer(
        [int(x) for x in args.ids.split(",")]), unet=unet, scheduler=scheduler, safety_checker=None,
        feature_extractor=None, requires_safety_checker=False)
    pipe.set_progress_bar_config(disable=True)
    unet_ms = []
    forward = unet.forward

    def timed(*a, **k):
        t = time.perf_counter()
        out = forward(*a, **k)
        unet_ms.append((time.perf_counter() - t) * 1000)
        return out

    unet.forward = timed
    emit("ready", loraModules=fused, checked=checked, checkMs=check_ms)
    for i in range(args.images):
        unet_ms.clear()
        cpu = time.process_time()
        t = time.perf_counter()
        kwargs = {"eta": args.eta} if args.scheduler == "tcd" else {}
        with torch.no_grad():
            image = pipe(args.prompt, height=args.size, width=args.size,
                         num_inference_steps=args.steps, guidance_scale=args.guidance,
                         generator=torch.Generator().manual_seed(args.seed + i), **kwargs).images[0]
        ms = (time.perf_counter() - t) * 1000
        emit("image", ms=ms, unetMs=list(unet_ms), cpuMs=(time.process_time() - cpu) * 1000,
             size=list(image.size))
    emit("done", torch=torch.__version__, threads=torch.get_num_threads())


if __name__ == "__main__":
    main()
