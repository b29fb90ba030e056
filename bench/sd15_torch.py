"""The random-weight, full-size SD 1.5 that `diffusers_export.py` exports
(the project's fp32 set in the bench), built again in PyTorch for the peer
comparison: `peers_convert.py` writes it for stable-diffusion.cpp,
`peers_diffusers.py` runs it in diffusers.

    import sd15_torch
    sd15_torch.import_diffusers(src, work)     # a diffusers checkout, offline
    models = sd15_torch.build({"unet"}, export)  # {"text_encoder", "unet", "vae"}, fresh process
    sd15_torch.check_against_export(models["unet"], export / "unet" / "model.onnx")

The export draws its weights from torch's global generator in one sequence:
the text encoder is constructed (its biases and norms keep their default
initialisation, drawn from the generator as the process started it), then
`randomized` (seed 1234, normal draws over every parameter of rank > 1);
the UNet likewise; three example inputs for the UNet's export; then the VAE.
`build` replays that sequence in a fresh process, with the export script's
own `CLIPTextModel` and `randomized` (read from its source, so there is one
definition) and SD 1.5's UNet and VAE configs (runwayml/stable-diffusion-v1-5
`unet/config.json`, `vae/config.json`), so it holds the same tensors, except
the text encoder's biases and norms, drawn before the first seed (Debian's
torch seeds its generator at random when a process starts), which it takes
from the export's files; `check_against_export` proves the rest against the
export, initializer by initializer.
"""
import ast
import importlib
import os
import sys
from pathlib import Path

import numpy as np
import onnx
import torch

EXPORT_SCRIPT = Path(__file__).resolve().with_name("diffusers_export.py")
SEED = 1234

UNET_CONFIG = dict(
    sample_size=64, in_channels=4, out_channels=4, layers_per_block=2,
    down_block_types=("CrossAttnDownBlock2D",) * 3 + ("DownBlock2D",),
    up_block_types=("UpBlock2D",) + ("CrossAttnUpBlock2D",) * 3,
    block_out_channels=(320, 640, 1280, 1280), cross_attention_dim=768, attention_head_dim=8,
)
VAE_CONFIG = dict(
    in_channels=3, out_channels=3, latent_channels=4, sample_size=512, layers_per_block=2,
    down_block_types=("DownEncoderBlock2D",) * 4, up_block_types=("UpDecoderBlock2D",) * 4,
    block_out_channels=(128, 256, 512, 512),
)


def import_diffusers(src, work):
    """Puts the checkout's `src/` on sys.path, stubbing in `work` the packages diffusers imports
    but never uses offline (`diffusers_offline.py`). The safetensors stand-in is made to hand out
    any name (its functions fail when called): the pipeline modules import `safe_open` and
    `load_file` at the top, and the peer scripts read safetensors files with numpy instead."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import diffusers_offline

    diffusers_offline.stub_missing(work)
    sys.path.insert(0, str(Path(src).resolve() / "src"))
    for name in ("safetensors", "safetensors.torch"):
        module = importlib.import_module(name)
        if os.path.realpath(getattr(module, "__file__", "")).startswith(os.path.realpath(work)):
            module.__getattr__ = _unused(name)


def _unused(module):
    def attribute(name):
        if name.startswith("__"):
            raise AttributeError(name)

        def unused(*args, **kwargs):
            raise NotImplementedError(f"{module}.{name}: a stand-in, the package is not installed")

        return unused

    return attribute


def _from_export_script():
    """`CLIPTextModel` and `randomized` as `diffusers_export.py` defines them, without running it."""
    tree = ast.parse(EXPORT_SCRIPT.read_text())
    wanted = [n for n in tree.body if getattr(n, "name", None) in ("CLIPTextModel", "randomized")]
    namespace = {"torch": torch, "nn": torch.nn}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), str(EXPORT_SCRIPT), "exec"), namespace)
    return namespace["CLIPTextModel"], namespace["randomized"]


CLIPTextModel, randomized = _from_export_script()


def build(parts, export_dir):
    """The export's models named in `parts` ("text_encoder", "unet", "vae"), by the export's
    sequence of draws; must run before anything else draws from torch's global generator.

    The text encoder is made first, before the export seeds the generator, so its parameters of
    rank 1 (biases, norms: their default initialisation) come from the generator's state at the
    process's start, which Debian's torch seeds at random: those are taken from the export's
    files (`export_dir`), where each random one is an initializer of its own name (LayerNorm's,
ones and zeros, are the same in every process, and the exporter shares them under one name). What follows
    (the text encoder's other weights, the UNet, the VAE) is drawn after `randomized` seeded the
    generator, the same in any process."""
    from diffusers.models import AutoencoderKL, UNet2DConditionModel

    out = {}
    with torch.no_grad():
        text = randomized(CLIPTextModel())
        if "text_encoder" in parts:
            exported = export_tensors(Path(export_dir) / "text_encoder" / "model.onnx")
            for name, p in text.named_parameters():
                if p.dim() != 1:
                    continue
                if name in exported and tuple(exported[name].shape) == tuple(p.shape):
                    p.copy_(torch.from_numpy(exported[name].copy()))
                elif not bool((p == p[0]).all()):
                    # Constant ones (LayerNorm's weights and biases: ones and zeros, whatever the
                    # generator) the exporter shares under one name; a random one has its own.
                    raise SystemExit(f"the export's text encoder has no initializer {name}")
            out["text_encoder"] = text
        del text
        if not parts & {"unet", "vae"}:
            return out
        unet = randomized(UNet2DConditionModel(**UNET_CONFIG))
        if "unet" in parts:
            out["unet"] = unet
        del unet
        if "vae" in parts:
            # The UNet's example inputs, drawn between the UNet and the VAE.
            torch.randn(2, 4, 64, 64), torch.randn(2), torch.randn(2, 77, 768)
            out["vae"] = randomized(AutoencoderKL(**VAE_CONFIG))
    return out


def clip_transformers_state_dict(model):
    """The text encoder's weights under transformers' `CLIPTextModel` names (`text_model.…`)."""
    out = {}
    for name, value in model.state_dict().items():
        if name.startswith("layers."):
            i, rest = name[len("layers."):].split(".", 1)
            rest = rest.replace("fc1.", "mlp.fc1.").replace("fc2.", "mlp.fc2.")
            out[f"text_model.encoder.layers.{i}.{rest}"] = value
        elif name.startswith(("token_embedding.", "position_embedding.")):
            out[f"text_model.embeddings.{name}"] = value
        else:
            out[f"text_model.{name}"] = value
    return out


def export_tensors(model_path):
    """`{name: array}` of an ONNX model's float32 initializers, external data memory-mapped."""
    model = onnx.load(str(model_path), load_external_data=False)
    folder = Path(model_path).parent
    maps = {}
    out = {}
    for t in model.graph.initializer:
        if t.data_type != onnx.TensorProto.FLOAT:
            continue
        ext = {e.key: e.value for e in t.external_data}
        if ext.get("location"):
            file = folder / ext["location"]
            if file not in maps:
                maps[file] = np.memmap(file, dtype=np.uint8, mode="r")
            begin = int(ext.get("offset", 0))
            raw = maps[file][begin:begin + int(ext["length"])]
        else:
            raw = t.raw_data
        out[t.name] = np.frombuffer(raw, dtype="<f4").reshape(tuple(t.dims))
    return out


def check_against_export(model, onnx_path):
    """Compares every initializer of the export named like one of `model`'s parameters (the
    exporter renames some, e.g. transposed MatMul weights; those are not compared). Returns the
    counts; raises SystemExit naming the first difference, or when nothing could be compared."""
    exported = export_tensors(onnx_path)
    compared = 0
    for name, value in model.state_dict().items():
        if name in exported:
            compared += 1
            mine = value.detach().numpy()
            if mine.shape != exported[name].shape or not np.array_equal(mine, exported[name]):
                raise SystemExit(
                    f"{name} differs from {onnx_path}'s: the export was not written by this "
                    f"{EXPORT_SCRIPT.name} from this diffusers checkout (rewrite it, or give the "
                    "export the same script wrote)"
                )
    if compared == 0:
        raise SystemExit(f"no initializer of {onnx_path} is named like a parameter: not this export")
    return {"compared": compared, "parameters": len(model.state_dict()), "initializers": len(exported)}
