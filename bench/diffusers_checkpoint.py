"""diffusers' side of `full_checkpoint_check.ts`: writes a random-weight SD 1.5
in the forms users have it, with diffusers' own code, reads each back as
diffusers' `from_single_file` does and makes the reference images with
diffusers' own `StableDiffusionPipeline`, so the project's `models add` of the
same files can be held against them.

    python3 diffusers_checkpoint.py SRC JOB_JSON OUT_DIR

- SRC: a diffusers v0.25.0 checkout (`git archive v0.25.0 src scripts`).
- The models: `diffusers_export.py`'s builders (its restated `CLIPTextModel`,
  diffusers' `UNet2DConditionModel` and `AutoencoderKL`, seeded normal
  weights), with the configs diffusers' `convert_from_ckpt.py`
  (`create_unet_diffusers_config`, `create_vae_diffusers_config`) derives
  from SD 1.x's `v1-inference.yaml` (CompVis/stable-diffusion
  `configs/stable-diffusion/v1-inference.yaml`, restated below); with
  `"small": true` the same configs at test widths (UNet 32, VAE 32, text 64
  wide and 2 layers deep; the vocabulary and positions stay SD 1.x's), for
  trying the check in a minute.
- The forms, in JOB's `"checkpoints"` folder:
  - `sd15-random-diffusers/`: a diffusers folder, the UNet and VAE written by
    diffusers' `save_pretrained` (`diffusion_pytorch_model.safetensors` and
    `config.json`), the text encoder under transformers' names
    (`text_model.*`) in `model.safetensors` with transformers' `config.json`
    fields, `model_index.json`, SD 1.5's `scheduler/scheduler_config.json`
    and the tokenizer files JOB's `"tokenizer"` folder holds (the project's
    CLIP vocabulary);
  - `sd15-random-fp32.safetensors`, `sd15-random-fp16.safetensors`: the
    original CompVis layout, written by running diffusers'
    `scripts/convert_diffusers_to_original_stable_diffusion.py` itself on
    that folder (`--use_safetensors`, and `--half` for fp16);
  - `vae-random.safetensors`: a second VAE (seeded by JOB's `"vae_seed"`)
    in the original VAE-file layout (`encoder.*`, `decoder.*`,
    `quant_conv.*`, `post_quant_conv.*`, as `vae-ft-mse-840000-ema-pruned`),
    its names made by that script's `convert_vae_state_dict`.
- Reading back: `from_single_file` of v0.25.0 needs omegaconf and the
  Hugging Face hub (neither is installable where the Python package index is
  unreachable), so the functions it calls are called with the configs it
  would derive: `convert_ldm_unet_checkpoint`, `convert_ldm_vae_checkpoint`
  (also what `AutoencoderKL.from_single_file` runs on a VAE file) and
  `convert_ldm_clip_checkpoint` into a module with transformers'
  `CLIPTextModel` names over the restated encoder; `load_state_dict` is
  strict, so a key either map misses or leaves over stops the run. The fp16
  file's tensors are widened into the float32 models as `from_single_file`
  without `torch_dtype` does. The folder is read with `from_pretrained` (UNet,
  VAE) and its text encoder file as transformers names it; every weight
  diffusers reads from the folder must equal the one it reads from the fp32
  file, so the fp32 image is the folder's too.
- The images: `StableDiffusionPipeline` with `LCMScheduler` from SD 1.5's
  scheduler config, `prompt_embeds` from the read-back text encoder on JOB's
  `"input_ids"` (the project's tokenizer's; transformers' tokenizer cannot be
  installed here), guidance 0, `torch.Generator().manual_seed(seed)`, the
  full `AutoencoderKL` decoder, `output_type="np"` rounded as `numpy_to_pil`;
  once on the fp32 file's weights (`fp32`), once on the fp16 file's (`fp16`)
  and once on the fp32 file's with the second VAE (`fp32-vae`).

`safetensors` is not installed either: its `save_file`, `load_file` and
`safe_open`, which diffusers and the script call, are given here by
`safetensors_np.py` (numpy, the format's README). Writes OUT_DIR/NAME.rgb
(uint8 H×W×3), NAME.latents (float32, what the VAE decoded), result.json.
Every run writes the same files (the models are seeded before they are constructed). Full
size: about 10 minutes and 18–21 GB peak RSS on a 2-core x86-64 VM (docs/performance.md).
"""
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import runpy
import shutil
import sys
import time
import types
from pathlib import Path

import torch
from torch import nn

SRC, JOB, OUT = sys.argv[1:4]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diffusers_export as dx  # noqa: E402
import diffusers_offline  # noqa: E402
import safetensors_np  # noqa: E402
import sd15_torch  # noqa: E402

work = dx.setup(SRC)
diffusers_offline.stand_in_transformers(work)
# `convert_from_ckpt.py` imports the latent-diffusion pipeline, whose LDMBert is built on these
# transformers modules (never used here): stand-ins beside the package's.
for module, text in {
    "activations": "ACT2FN = {}\n",
    "modeling_outputs": "class BaseModelOutput:\n    pass\n",
}.items():
    with open(os.path.join(work, "transformers", f"{module}.py"), "w") as f:
        f.write(text)
with open(os.path.join(work, "transformers", "utils.py"), "a") as f:
    f.write("import logging as _logging\nlogging = type('logging', (), {'get_logger': staticmethod(_logging.getLogger)})\n")
torch.set_num_threads(os.cpu_count() or 1)


# ---- safetensors, by numpy ----


def load_file(filename, device="cpu"):
    """safetensors.torch.load_file: every tensor of a file (memory-mapped, copied one by one)."""
    return {k: torch.from_numpy(v) for k, v in safetensors_np.read(filename).items()}


def save_file(tensors, filename, metadata=None):
    """safetensors.torch.save_file."""
    safetensors_np.write(filename, {k: v.contiguous() for k, v in tensors.items()}, metadata)


class safe_open:  # noqa: N801 (the package's name)
    """safetensors.safe_open: keys() and get_tensor() of a file."""

    def __init__(self, filename, framework="pt", device="cpu"):
        self.tensors = load_file(filename)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False

    def keys(self):
        return list(self.tensors)

    def get_tensor(self, key):
        return self.tensors[key]


# A package record, so diffusers counts it as installed (`is_safetensors_available`).
os.makedirs(os.path.join(work, "safetensors-0.4.1.dist-info"), exist_ok=True)
with open(os.path.join(work, "safetensors-0.4.1.dist-info", "METADATA"), "w") as f:
    f.write("Metadata-Version: 2.1\nName: safetensors\nVersion: 0.4.1\n")
importlib.invalidate_caches()
safetensors_module = types.ModuleType("safetensors")
safetensors_module.__spec__ = importlib.machinery.ModuleSpec("safetensors", None)
safetensors_module.__version__ = "0.4.1"
safetensors_module.safe_open = safe_open
safetensors_torch = types.ModuleType("safetensors.torch")
safetensors_torch.__spec__ = importlib.machinery.ModuleSpec("safetensors.torch", None)
safetensors_torch.load_file, safetensors_torch.save_file = load_file, save_file
safetensors_module.torch = safetensors_torch
sys.modules["safetensors"], sys.modules["safetensors.torch"] = safetensors_module, safetensors_torch

import diffusers  # noqa: E402
from diffusers.models import AutoencoderKL, UNet2DConditionModel  # noqa: E402
from diffusers.pipelines.stable_diffusion import convert_from_ckpt  # noqa: E402
from diffusers.pipelines.stable_diffusion.pipeline_stable_diffusion import (  # noqa: E402
    StableDiffusionPipeline,
)
from diffusers.schedulers.scheduling_lcm import LCMScheduler  # noqa: E402

MODEL_SEED = 1234  # diffusers_export.py's `randomized` seed


class Attrs(dict):
    """What OmegaConf gives `convert_from_ckpt.py`: a mapping read by attribute too."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError as e:
            raise AttributeError(name) from e


def attrs(value):
    if isinstance(value, dict):
        return Attrs({k: attrs(v) for k, v in value.items()})
    return [attrs(v) for v in value] if isinstance(value, list) else value


def v1_inference(small):
    """CompVis/stable-diffusion configs/stable-diffusion/v1-inference.yaml, the parts the
    converter reads (widths narrowed when `small`)."""
    return attrs({
        "model": {
            "target": "ldm.models.diffusion.ddpm.LatentDiffusion",
            "params": {
                "linear_start": 0.00085,
                "linear_end": 0.0120,
                "timesteps": 1000,
                "image_size": 64,
                "channels": 4,
                "scale_factor": 0.18215,
                "unet_config": {
                    "target": "ldm.modules.diffusionmodules.openaimodel.UNetModel",
                    "params": {
                        "image_size": 32,
                        "in_channels": 4,
                        "out_channels": 4,
                        "model_channels": 32 if small else 320,
                        "attention_resolutions": [4, 2, 1],
                        "num_res_blocks": 2,
                        "channel_mult": [1, 2, 4, 4],
                        "num_heads": 8,
                        "use_spatial_transformer": True,
                        "transformer_depth": 1,
                        "context_dim": 64 if small else 768,
                        "use_checkpoint": True,
                        "legacy": False,
                    },
                },
                "first_stage_config": {
                    "target": "ldm.models.autoencoder.AutoencoderKL",
                    "params": {
                        "embed_dim": 4,
                        "ddconfig": {
                            "double_z": True,
                            "z_channels": 4,
                            "resolution": 256,
                            "in_channels": 3,
                            "out_ch": 3,
                            "ch": 32 if small else 128,
                            "ch_mult": [1, 2, 4, 4],
                            "num_res_blocks": 2,
                            "attn_resolutions": [],
                            "dropout": 0.0,
                        },
                    },
                },
                "cond_stage_config": {"target": "ldm.modules.encoders.modules.FrozenCLIPEmbedder"},
            },
        }
    })


def text_config(small):
    """transformers' CLIPTextConfig of SD 1.x (openai/clip-vit-large-patch14's text part)."""
    return {
        "vocab_size": 49408,
        "hidden_size": 64 if small else 768,
        "intermediate_size": 256 if small else 3072,
        "num_hidden_layers": 2 if small else 12,
        "num_attention_heads": 1 if small else 12,
        "max_position_embeddings": 77,
        "hidden_act": "quick_gelu",
        "layer_norm_eps": 1e-5,
        "projection_dim": 768,
        "bos_token_id": 0,
        "eos_token_id": 2,
        "pad_token_id": 1,
    }


def new_text_encoder(small):
    c = text_config(small)
    return dx.CLIPTextModel(
        vocab=c["vocab_size"], d=c["hidden_size"], heads=c["num_attention_heads"],
        ff=c["intermediate_size"], layers=c["num_hidden_layers"], positions=c["max_position_embeddings"],
    ).eval()


class TransformersNames(nn.Module):
    """The restated encoder's modules under transformers' `CLIPTextModel` names
    (`text_model.embeddings.*`, `text_model.encoder.layers.N.mlp.fc1`, …), so
    `convert_ldm_clip_checkpoint` loads into it what it loads into transformers'."""

    def __init__(self, model):
        super().__init__()
        tm = nn.Module()
        tm.embeddings = nn.Module()
        tm.embeddings.token_embedding = model.token_embedding
        tm.embeddings.position_embedding = model.position_embedding
        tm.encoder = nn.Module()
        tm.encoder.layers = nn.ModuleList()
        for layer in model.layers:
            named = nn.Module()
            named.self_attn, named.layer_norm1, named.layer_norm2 = (
                layer.self_attn, layer.layer_norm1, layer.layer_norm2)
            named.mlp = nn.Module()
            named.mlp.fc1, named.mlp.fc2 = layer.fc1, layer.fc2
            tm.encoder.layers.append(named)
        tm.final_layer_norm = model.final_layer_norm
        self.text_model = tm


def configs(small, size):
    original = v1_inference(small)
    unet_config = convert_from_ckpt.create_unet_diffusers_config(original, image_size=size)
    unet_config["upcast_attention"] = None  # from_single_file's default
    vae_config = convert_from_ckpt.create_vae_diffusers_config(original, image_size=size)
    vae_config["scaling_factor"] = original.model.params.scale_factor
    return unet_config, vae_config


def seeded_vae(vae_config, seed):
    """A second VAE: another seed for its construction and its normal weights."""
    torch.manual_seed(seed)
    model = AutoencoderKL(**vae_config)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.02)
    return model.eval()


def write_forms(job, folder, unet_config, vae_config, convert_script):
    """The diffusers folder, the two single files (by the script) and the VAE file."""
    small = job["small"]
    t0 = time.time()
    if folder.exists():
        shutil.rmtree(folder)
    for sub in ("unet", "vae", "text_encoder", "tokenizer", "scheduler"):
        (folder / sub).mkdir(parents=True)
    with torch.no_grad():
        # Seeded before the text encoder is constructed too (its default-initialised biases and
        # norms are drawn then), so every run writes the same files.
        torch.manual_seed(MODEL_SEED)
        text = dx.randomized(new_text_encoder(small))
        save_file(sd15_torch.clip_transformers_state_dict(text), folder / "text_encoder" / "model.safetensors")
        del text
        json.dump({"architectures": ["CLIPTextModel"], "model_type": "clip_text_model",
                   "torch_dtype": "float32", "transformers_version": "4.36.0", **text_config(small)},
                  open(folder / "text_encoder" / "config.json", "w"), indent=2)
        unet = dx.randomized(UNet2DConditionModel(**unet_config))
        unet.save_pretrained(str(folder / "unet"))  # safetensors, diffusers' default
        del unet
        vae = dx.randomized(AutoencoderKL(**vae_config))
        vae.save_pretrained(str(folder / "vae"))
        del vae
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(Path(job["tokenizer"]) / name, folder / "tokenizer" / name)
    json.dump(dx.SD15_SCHEDULER, open(folder / "scheduler" / "scheduler_config.json", "w"), indent=2)
    json.dump({
        "_class_name": "StableDiffusionPipeline", "_diffusers_version": diffusers.__version__,
        "feature_extractor": [None, None], "requires_safety_checker": False,
        "safety_checker": [None, None], "scheduler": ["diffusers", "PNDMScheduler"],
        "text_encoder": ["transformers", "CLIPTextModel"], "tokenizer": ["transformers", "CLIPTokenizer"],
        "unet": ["diffusers", "UNet2DConditionModel"], "vae": ["diffusers", "AutoencoderKL"],
    }, open(folder / "model_index.json", "w"), indent=2)
    written = {"folder_s": time.time() - t0}

    # The script itself, as a user runs it, for each single file.
    files = Path(job["checkpoints"])
    for name, half in (("sd15-random-fp32.safetensors", False), ("sd15-random-fp16.safetensors", True)):
        t0 = time.time()
        argv = sys.argv
        sys.argv = [str(convert_script), "--model_path", str(folder), "--checkpoint_path",
                    str(files / name), "--use_safetensors"] + (["--half"] if half else [])
        stdout = sys.stdout
        sys.stdout = open(os.devnull, "w")  # its "Reshaping …" lines
        try:
            runpy.run_path(str(convert_script), run_name="__main__")
        finally:
            sys.stdout.close()
            sys.stdout, sys.argv = stdout, argv
        written[f"{name}_s"] = time.time() - t0

    # The second VAE, in the original VAE-file layout.
    t0 = time.time()
    spec = importlib.util.spec_from_file_location("to_original", convert_script)
    to_original = importlib.util.module_from_spec(spec)
    stdout = sys.stdout
    sys.stdout = open(os.devnull, "w")
    try:
        spec.loader.exec_module(to_original)
        vae2 = seeded_vae(vae_config, job["vae_seed"])
        save_file(to_original.convert_vae_state_dict(vae2.state_dict()), files / "vae-random.safetensors")
    finally:
        sys.stdout.close()
        sys.stdout = stdout
    del vae2
    written["vae_s"] = time.time() - t0
    return written


def read_single_file(path, small, unet_config, vae_config, parts=("text_encoder", "unet", "vae")):
    """The models diffusers' from_single_file makes of an original-layout file (see the module)."""
    checkpoint = load_file(str(path))
    if "state_dict" in checkpoint:
        checkpoint = checkpoint["state_dict"]
    out = {}
    with torch.no_grad():
        if "unet" in parts:
            converted = convert_from_ckpt.convert_ldm_unet_checkpoint(
                checkpoint, unet_config, path=str(path), extract_ema=False)
            out["unet"] = UNet2DConditionModel(**unet_config).eval()
            out["unet"].load_state_dict(converted)  # strict
            del converted
        if "vae" in parts:
            converted = convert_from_ckpt.convert_ldm_vae_checkpoint(checkpoint, vae_config)
            out["vae"] = AutoencoderKL(**vae_config).eval()
            out["vae"].load_state_dict(converted)
            del converted
        if "text_encoder" in parts:
            text = new_text_encoder(small)
            convert_from_ckpt.convert_ldm_clip_checkpoint(checkpoint, text_encoder=TransformersNames(text))
            out["text_encoder"] = text
    dtypes = sorted({str(v.dtype) for v in checkpoint.values()})
    del checkpoint
    return out, dtypes


def digests(model):
    """`{name: sha256 of its bytes}` of every parameter and buffer of a model."""
    return {k: hashlib.sha256(v.detach().contiguous().numpy().tobytes()).hexdigest()
            for k, v in model.state_dict().items()}


def read_folder(folder, small):
    """The digests of the models diffusers' from_pretrained makes of the folder (UNet, VAE), and
    of its text encoder file read under transformers' names; one model in memory at a time."""
    out = {}
    with torch.no_grad():
        for part, cls in (("unet", UNet2DConditionModel), ("vae", AutoencoderKL)):
            model = cls.from_pretrained(str(folder / part), use_safetensors=True)
            out[part] = digests(model)
            del model
        text = new_text_encoder(small)
        TransformersNames(text).load_state_dict(load_file(str(folder / "text_encoder" / "model.safetensors")))
        out["text_encoder"] = digests(text)
    return out


def same_weights(folder_digests, model):
    """Every parameter and buffer diffusers reads from the folder equal, bit for bit, to the one
    it reads from the fp32 file: how many."""
    mine = digests(model)
    if mine.keys() != folder_digests.keys():
        raise SystemExit(f"the folder's and the fp32 file's models have other names: "
                         f"{sorted(mine.keys() ^ folder_digests.keys())[:5]}")
    for k, d in mine.items():
        if d != folder_digests[k]:
            raise SystemExit(f"{k}: diffusers reads another value from the folder than from the fp32 file")
    return len(mine)


def generate(name, models, job, out):
    """One image of diffusers' own pipeline; writes NAME.rgb and NAME.latents."""
    with torch.no_grad():
        ids = torch.tensor([job["input_ids"]], dtype=torch.int64)
        prompt_embeds = models["text_encoder"](ids)[0]
        pipe = StableDiffusionPipeline(
            vae=models["vae"], text_encoder=None, tokenizer=None, unet=models["unet"],
            scheduler=LCMScheduler.from_config(dx.SD15_SCHEDULER), safety_checker=None,
            feature_extractor=None, requires_safety_checker=False,
        )
        captured = {}
        decode = pipe.vae.decode

        def decode_and_keep(latents, *a, **k):
            captured["latents"] = latents.detach().clone()
            return decode(latents, *a, **k)

        pipe.vae.decode = decode_and_keep
        t0 = time.time()
        image = pipe(
            prompt_embeds=prompt_embeds, height=job["size"], width=job["size"],
            num_inference_steps=job["steps"], guidance_scale=0,
            generator=torch.Generator().manual_seed(job["seed"]), output_type="np",
        ).images[0]
        seconds = time.time() - t0
        pipe.vae.decode = decode
    (image * 255).round().astype("uint8").tofile(os.path.join(out, f"{name}.rgb"))
    captured["latents"].numpy().astype("<f4").tofile(os.path.join(out, f"{name}.latents"))
    prompt_embeds.numpy().astype("<f4").tofile(os.path.join(out, f"{name}.embeds"))
    print(f"{name}: {seconds:.1f} s", flush=True)
    return {"seconds": seconds, "timesteps": [int(t) for t in pipe.scheduler.timesteps]}


def main():
    job = json.load(open(JOB))
    os.makedirs(OUT, exist_ok=True)
    small = job["small"]
    convert_script = Path(job["convert_script"]).resolve()
    unet_config, vae_config = configs(small, job["size"])
    files = Path(job["checkpoints"])
    files.mkdir(parents=True, exist_ok=True)
    folder = files / "sd15-random-diffusers"
    result = {"torch": torch.__version__, "diffusers": diffusers.__version__,
              "threads": torch.get_num_threads(), "unet_config": unet_config,
              "vae_config": vae_config, "runs": {}}
    result["written"] = write_forms(job, folder, unet_config, vae_config, convert_script)
    print(f"written: {result['written']}", flush=True)

    # The folder: the same weights as the fp32 file, read as diffusers reads a folder.
    t0 = time.time()
    from_folder = read_folder(folder, small)
    result["read_folder_s"] = time.time() - t0
    t0 = time.time()
    models, result["fp32_file_dtypes"] = read_single_file(files / "sd15-random-fp32.safetensors", small,
                                                          unet_config, vae_config)
    result["read_fp32_s"] = time.time() - t0
    result["folder_equals_fp32_file"] = {
        part: same_weights(from_folder[part], models[part]) for part in ("text_encoder", "unet", "vae")}
    del from_folder
    result["runs"]["fp32"] = generate("fp32", models, job, OUT)
    vae2, _ = read_single_file(files / "vae-random.safetensors", small, unet_config, vae_config,
                               parts=("vae",))
    models["vae"] = vae2["vae"]
    del vae2
    result["runs"]["fp32-vae"] = generate("fp32-vae", models, job, OUT)
    del models

    t0 = time.time()
    models, result["fp16_file_dtypes"] = read_single_file(files / "sd15-random-fp16.safetensors", small,
                                                          unet_config, vae_config)
    result["read_fp16_s"] = time.time() - t0
    result["runs"]["fp16"] = generate("fp16", models, job, OUT)
    del models
    json.dump(result, open(os.path.join(OUT, "result.json"), "w"), indent=2)
    shutil.rmtree(work)


main()
