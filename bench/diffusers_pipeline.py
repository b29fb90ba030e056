"""Runs diffusers' own `StableDiffusionPipeline` on the random-weight,
full-size SD 1.5 that `diffusers_export.py` exports, with a LoRA fused and a
few-step scheduler, so `full_diffusers.ts` can hold the project's images
(the same export, the same LoRA merged by the project) against diffusers'.

    python3 diffusers_pipeline.py SRC TCD_SRC JOB_JSON OUT_DIR

- SRC: a diffusers v0.25.0 checkout (`git archive v0.25.0 src scripts`), the
  one the export is made from. The text encoder and the UNet are those of the
  export (`"export"` in the job): `sd15_torch.build` replays the export's
  sequence of draws from torch's generator and takes the text encoder's
  biases and norms from the export's files (they are drawn before the export
  seeds the generator, and Debian's torch seeds it at random at start), and
  `check_against_export` proves them equal to the ONNX files' initializers.
  Built in any other order, the UNet's biases would be other draws.
- TCD_SRC: a diffusers v0.27.2 checkout (`git archive v0.27.2 src`), whose
  `schedulers/scheduling_tcd.py` (`TCDScheduler`, first released in v0.27) is
  loaded into the v0.25.0 package as `diffusers.schedulers.scheduling_tcd`.
  v0.25.0 rather than a release that has both: from v0.27 diffusers loads
  LoRAs only through PEFT, which cannot be installed where the Python package
  index is unreachable; v0.25.0 still has the LoRA-compatible layers
  (`load_lora_weights` → `unet.load_attn_procs`, `fuse_lora`).
- JOB_JSON: `{"export": DIR, "input_ids": [77 ints], "seed": n, "size": 512, "taesd": PATH
  or null, "groups": [{"lora": PATH, "runs": [{"name", "scheduler": "tcd" |
  "lcm", "steps", "eta", "guidance_scale"}]}]}`: per group a fresh UNet with
  that LoRA (a kohya `.safetensors`, read here with numpy; "" for none) loaded
  by `pipe.load_lora_weights(state_dict)` and fused by `pipe.fuse_lora()`, then
  each run as `pipe(prompt_embeds=…, num_inference_steps=steps,
  guidance_scale=…, eta=eta, generator=torch.Generator().manual_seed(seed),
  output_type="np")`.
- The prompt: the ids the project's tokenizer gives (transformers' tokenizer
  cannot be installed here), through `diffusers_export.py`'s restated CLIP
  text encoder, as `prompt_embeds`; guidance ≤ 1 has no negative pass.
- The scheduler: `XScheduler.from_config(SD 1.5's scheduler config)`, as the
  Hyper-SD and LCM-LoRA model cards build it.
- The VAE: with `taesd`, diffusers' `AutoencoderTiny` whose decoder gets the
  weights of that `taesd_decoder.safetensors` (madebyollin's layout, keys
  mapped as diffusers' `scripts/convert_tiny_autoencoder_to_diffusers.py`
  maps them: Sequential index − 1 under `decoder.layers.`); else the export's
  `AutoencoderKL`.

Writes OUT_DIR/NAME.rgb (uint8 H×W×3, `numpy_to_pil`'s `(x * 255).round()`),
OUT_DIR/NAME.latents (float32, the latents the VAE decoded) and
OUT_DIR/result.json (timings, versions). `transformers` is replaced by a
stand-in (classes the pipeline modules import, never used with
`prompt_embeds`), with a package record so diffusers counts it as installed;
the other packages diffusers imports but never uses are stubbed as for the
export (`diffusers_offline.py`). About 6 GB of memory.
"""
import importlib.util
import json
import os
import shutil
import struct
import sys
import time
from pathlib import Path

import numpy as np
import torch

SRC, TCD_SRC, JOB, OUT = sys.argv[1:5]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diffusers_export as dx  # noqa: E402
import diffusers_offline  # noqa: E402
import sd15_torch  # noqa: E402

work = dx.setup(SRC)
torch.set_num_threads(os.cpu_count() or 1)

diffusers_offline.stand_in_transformers(work)

import diffusers  # noqa: E402
import diffusers.schedulers  # noqa: E402

spec = importlib.util.spec_from_file_location(
    "diffusers.schedulers.scheduling_tcd",
    os.path.join(TCD_SRC, "src", "diffusers", "schedulers", "scheduling_tcd.py"),
)
scheduling_tcd = importlib.util.module_from_spec(spec)
sys.modules["diffusers.schedulers.scheduling_tcd"] = scheduling_tcd
spec.loader.exec_module(scheduling_tcd)
TCDScheduler = scheduling_tcd.TCDScheduler

from diffusers.models import AutoencoderTiny  # noqa: E402
from diffusers.pipelines.stable_diffusion.pipeline_stable_diffusion import (  # noqa: E402
    StableDiffusionPipeline,
)
from diffusers.schedulers.scheduling_lcm import LCMScheduler  # noqa: E402
from diffusers.utils.constants import USE_PEFT_BACKEND  # noqa: E402

assert not USE_PEFT_BACKEND, "this script runs diffusers' LoRA-compatible layers, not PEFT"

DTYPES = {"F32": np.float32, "F16": np.float16}


def read_safetensors(path):
    """A `.safetensors` file as {name: float32 torch tensor} (the format's README: u64 header size, JSON, data)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        array = np.frombuffer(data[8 + n + begin:8 + n + end], dtype=DTYPES[info["dtype"]])
        out[name] = torch.from_numpy(array.astype(np.float32).reshape(info["shape"]))
    return out


def tiny_vae(path):
    """diffusers' AutoencoderTiny (TAESD's config) with the decoder of a taesd_decoder.safetensors."""
    vae = AutoencoderTiny().eval()
    weights = read_safetensors(path)
    # convert_tiny_autoencoder_to_diffusers.py: "decoder.layers.{index - 1}.{rest}".
    mapped = {}
    for k, v in weights.items():
        index, rest = k.split(".", 1)
        mapped[f"layers.{int(index) - 1}.{rest}"] = v
    missing, unexpected = vae.decoder.load_state_dict(mapped, strict=True), None
    del missing, unexpected
    return vae


job = json.load(open(JOB))
os.makedirs(OUT, exist_ok=True)
result = {
    "torch": torch.__version__,
    "diffusers": diffusers.__version__,
    "tcd_from": "v0.27.2 schedulers/scheduling_tcd.py",
    "threads": torch.get_num_threads(),
    "runs": {},
}
with torch.no_grad():
    t0 = time.time()
    # First, before anything else draws from torch's generator: the export's own weights.
    parts = {"text_encoder", "unet"} | (set() if job.get("taesd") else {"vae"})
    models = sd15_torch.build(parts, job["export"])
    export = Path(job["export"])
    result["checked"] = {
        part: sd15_torch.check_against_export(models[part], export / part / "model.onnx")
        for part in ("text_encoder", "unet")
    }
    text_encoder = models.pop("text_encoder")
    ids = torch.tensor([job["input_ids"]], dtype=torch.int32)
    prompt_embeds = text_encoder(ids)[0]
    del text_encoder
    vae = tiny_vae(job["taesd"]) if job.get("taesd") else models.pop("vae")
    unet = models.pop("unet")
    # Each group fuses its LoRA into these weights, restored before the next.
    base_weights = {k: v.clone() for k, v in unet.state_dict().items()}
    result["text_and_vae_s"] = time.time() - t0
    for group in job["groups"]:
        t0 = time.time()
        unet.load_state_dict(base_weights)
        pipe = StableDiffusionPipeline(
            vae=vae,
            text_encoder=None,
            tokenizer=None,
            unet=unet,
            scheduler=LCMScheduler.from_config(dx.SD15_SCHEDULER),
            safety_checker=None,
            feature_extractor=None,
            requires_safety_checker=False,
        )
        if group["lora"]:
            pipe.load_lora_weights(read_safetensors(group["lora"]))
            pipe.fuse_lora(fuse_text_encoder=False)  # UNet-only LoRAs; no text encoder here
        load_s = time.time() - t0
        for run in group["runs"]:
            cls = {"tcd": TCDScheduler, "lcm": LCMScheduler}[run["scheduler"]]
            pipe.scheduler = cls.from_config(dx.SD15_SCHEDULER)
            captured = {}
            decode = pipe.vae.decode

            def decode_and_keep(latents, *a, **k):
                captured["latents"] = latents.detach().clone()
                return decode(latents, *a, **k)

            pipe.vae.decode = decode_and_keep
            t1 = time.time()
            image = pipe(
                prompt_embeds=prompt_embeds,
                height=job["size"],
                width=job["size"],
                num_inference_steps=run["steps"],
                guidance_scale=run["guidance_scale"],
                eta=run["eta"],
                generator=torch.Generator().manual_seed(job["seed"]),
                output_type="np",
            ).images[0]
            seconds = time.time() - t1
            pipe.vae.decode = decode
            pixels = (image * 255).round().astype("uint8")  # numpy_to_pil
            pixels.tofile(os.path.join(OUT, f"{run['name']}.rgb"))
            captured["latents"].numpy().astype("<f4").tofile(os.path.join(OUT, f"{run['name']}.latents"))
            result["runs"][run["name"]] = {
                **run,
                "seconds": seconds,
                "timesteps": [int(t) for t in pipe.scheduler.timesteps],
                "lora_load_and_fuse_s": load_s,
            }
            print(f"{run['name']}: {seconds:.1f} s", flush=True)
        # The LoRA layers off (what `unload_lora_weights` does to a UNet without PEFT; the
        # pipeline's own call also walks the text encoder, which is None here); the weights are
        # restored at the top of the next group.
        for _, module in unet.named_modules():
            if hasattr(module, "set_lora_layer"):
                module.set_lora_layer(None)
        del pipe
json.dump(result, open(os.path.join(OUT, "result.json"), "w"), indent=2)
shutil.rmtree(work)
