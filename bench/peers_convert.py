"""Writes the bench's random-weight SD 1.5 in the files stable-diffusion.cpp
loads, for `deno task bench --full --only peers`: the weights the project's
ONNX export holds (`diffusers_export.py`), built again by `sd15_torch.py` (the
text encoder's random biases taken from the export) and checked against that
export initializer by initializer.

    /usr/bin/python3 bench/peers_convert.py DIFFUSERS_SRC EXPORT_DIR TAESD_DECODER OUT_DIR

Writes into OUT_DIR:
- `sd15.safetensors`: the single-file checkpoint layout of the original SD 1.5
  release (`model.diffusion_model.` UNet, `first_stage_model.` VAE,
  `cond_stage_model.transformer.` CLIP text model), fp32, converted with the
  functions of diffusers' own
  `scripts/convert_diffusers_to_original_stable_diffusion.py` from the
  checkout (its UNet and VAE maps; transformers' names for the text model).
- `taesd.safetensors`: diffusers' `AutoencoderTiny` state dict (the layout of
  madebyollin/taesd `diffusion_pytorch_model.safetensors`, which
  stable-diffusion.cpp's `--taesd` reads), its decoder the project's TAESD
  decoder stand-in (TAESD_DECODER, `taesd_decoder.safetensors` keys, moved as
  diffusers' `scripts/convert_tiny_autoencoder_to_diffusers.py` moves them),
  its encoder seeded (stable-diffusion.cpp loads one; image generation from
  text never runs it).

Prints, as its last line, JSON: for each model how many of the export's
initializers named like a parameter were compared (all equal; the exporter
renames some, e.g. transposed MatMul weights), and the files' sizes. A
difference stops it with exit code 1. About 9 GB of memory and a few
minutes on 2 cores.
"""
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np  # noqa: E402
import sd15_torch  # noqa: E402


def diffusers_to_original(src):
    """The conversion functions of diffusers' `convert_diffusers_to_original_stable_diffusion.py`
    (it imports `safetensors.torch` names at the top and calls them only in its `__main__`)."""
    path = Path(src) / "scripts" / "convert_diffusers_to_original_stable_diffusion.py"
    spec = importlib.util.spec_from_file_location("to_original", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    src, export_dir, taesd_decoder, out_dir = (Path(a).resolve() for a in sys.argv[1:5])
    out_dir.mkdir(parents=True, exist_ok=True)
    work = tempfile.mkdtemp(prefix="peers-convert-")
    sd15_torch.import_diffusers(src, work)
    to_original = diffusers_to_original(src)
    from diffusers.models import AutoencoderTiny

    checked = {}
    tensors = {}
    with torch.no_grad():
        models = sd15_torch.build({"text_encoder", "unet", "vae"}, export_dir)
        text, unet, vae = models["text_encoder"], models["unet"], models["vae"]
        del models
        checked["text_encoder"] = sd15_torch.check_against_export(text, export_dir / "text_encoder" / "model.onnx")
        checked["vae_decoder"] = sd15_torch.check_against_export(vae, export_dir / "vae_decoder" / "model.onnx")
        checked["vae_encoder"] = sd15_torch.check_against_export(vae, export_dir / "vae_encoder" / "model.onnx")
        checked["unet"] = sd15_torch.check_against_export(unet, export_dir / "unet" / "model.onnx")
        text_sd = to_original.convert_text_enc_state_dict(sd15_torch.clip_transformers_state_dict(text))
        # As in the original release (transformers < 4.31 kept it): the position ids, int64.
        text_sd["text_model.embeddings.position_ids"] = torch.arange(77, dtype=torch.int64)[None]
        tensors.update({"cond_stage_model.transformer." + k: v for k, v in text_sd.items()})
        tensors.update({"first_stage_model." + k: v for k, v in to_original.convert_vae_state_dict(vae.state_dict()).items()})
        tensors.update({"model.diffusion_model." + k: v for k, v in to_original.convert_unet_state_dict(unet.state_dict()).items()})
        del text, unet, vae, text_sd
        checkpoint = out_dir / "sd15.safetensors"
        safetensors_np.write(checkpoint, tensors, {"format": "pt"})
        del tensors

        # TAESD's encoder: AutoencoderTiny's own initialisation, seeded.
        torch.manual_seed(sd15_torch.SEED)
        tiny = AutoencoderTiny().eval()
        state = tiny.state_dict()
        for k, v in safetensors_np.read(taesd_decoder).items():
            # taesd.py's Decoder starts with Clamp() (no weights); DecoderTiny has no such layer.
            index, rest = k.split(".", 1)
            name = f"decoder.layers.{int(index) - 1}.{rest}"
            if name not in state or tuple(state[name].shape) != v.shape:
                raise SystemExit(f"TAESD decoder tensor {k} has no place in AutoencoderTiny")
            state[name] = torch.from_numpy(v.astype(np.float32))
        tiny.load_state_dict(state)
        taesd = out_dir / "taesd.safetensors"
        safetensors_np.write(taesd, tiny.state_dict(), {"format": "pt"})
    print(json.dumps({
        "checked": checked,
        "checkpoint": {"path": str(checkpoint), "bytes": checkpoint.stat().st_size},
        "taesd": {"path": str(taesd), "bytes": taesd.stat().st_size},
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
