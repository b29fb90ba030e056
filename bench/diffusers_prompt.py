"""Runs diffusers' own textual-inversion loading and CLIP skip on the
random-weight, full-size SD 1.5 that `diffusers_export.py` exports, so
`full_prompt_check.ts` can hold the project's images (an embedding called by
its word; `[prompt] clip_skip = 2`) against diffusers'
(`load_textual_inversion`; `clip_skip = 1`).

    python3 diffusers_prompt.py SRC JOB_JSON OUT_DIR

- SRC: a diffusers v0.25.0 checkout (`git archive v0.25.0 src scripts`), the
  one the export is made from; its `StableDiffusionPipeline` (a
  `TextualInversionLoaderMixin`) runs from the prompt text:
  `load_textual_inversion` adds the embedding's tokens (`NAME`, `NAME_1`, …)
  to the tokenizer and its vectors as new rows of the text encoder's token
  table (`resize_token_embeddings`), `maybe_convert_prompt` turns the word
  into those tokens, and `encode_prompt` takes, with `clip_skip`, the hidden
  state `-(clip_skip + 1)` through the final layer norm.
- The text encoder and the UNet are the export's (`sd15_torch.build`, checked
  against the ONNX initializers). transformers cannot be installed where the
  Python package index is unreachable, so its two classes are restated here
  with the interface diffusers calls: `CLIPTextModel` (`get_input_embeddings`,
  `resize_token_embeddings`, `output_hidden_states`, `text_model.final_layer_norm`,
  as transformers v4.36 `modeling_clip.py` / `modeling_utils.py` define them)
  around the export's restated encoder, and `CLIPTokenizer` (added tokens split
  out of the text first, as `tokenization_utils.py` `tokenize` does; BOS, EOS,
  truncation and padding to 77 with EOS as SD 1.5's tokenizer config has them)
  whose byte-pair encoding of each remaining word is the job's table (the
  project's tokenizer computed it; its BPE is checked elsewhere against
  transformers').
- JOB_JSON: `{"export": DIR, "vocab": PATH, "words": {word: [ids]}, "seed": n,
  "size": 512, "taesd": PATH, "embedding": {"name": NAME, "vectors": [[768
  floats], …]}, "steps": n, "runs": [{"name", "prompt", "clip_skip": null |
  int}]}`; every run is `pipe(prompt=…, num_inference_steps=steps,
  guidance_scale=0, generator=torch.Generator().manual_seed(seed),
  output_type="np", clip_skip=…)` with `LCMScheduler` from SD 1.5's scheduler
  config and `AutoencoderTiny` with the TAESD weights (as `diffusers_pipeline.py`).

Writes OUT_DIR/NAME.rgb (uint8 H×W×3, `(x * 255).round()` as `numpy_to_pil`),
NAME.latents (float32, what the VAE decoded), NAME.embeds (float32 [77, 768],
what the UNet was conditioned on), NAME.ids (the 77 ids the text encoder read)
and result.json.
"""
import json
import os
import shutil
import sys
import time
import types
from pathlib import Path

import numpy as np
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
torch.set_num_threads(os.cpu_count() or 1)

import diffusers  # noqa: E402
from diffusers.models import AutoencoderTiny  # noqa: E402
from diffusers.pipelines.stable_diffusion.pipeline_stable_diffusion import (  # noqa: E402
    StableDiffusionPipeline,
)
from diffusers.schedulers.scheduling_lcm import LCMScheduler  # noqa: E402

BOS, EOS, LENGTH = 49406, 49407, 77


class TextEncoder(nn.Module):
    """transformers' `CLIPTextModel` interface over the export's restated encoder."""

    def __init__(self, model):
        super().__init__()
        self.text_model = model  # has token_embedding, position_embedding, layers, final_layer_norm
        self.config = types.SimpleNamespace()  # no use_attention_mask: SD 1.5's config has none

    @property
    def dtype(self):
        return torch.float32

    @property
    def device(self):
        return torch.device("cpu")

    def get_input_embeddings(self):
        return self.text_model.token_embedding

    def resize_token_embeddings(self, n):
        """modeling_utils.py `_get_resized_embeddings`: a new table, the old rows copied."""
        old = self.text_model.token_embedding
        new = nn.Embedding(n, old.weight.shape[1])
        new.weight.data.normal_(0, 0.02)
        k = min(n, old.weight.shape[0])
        new.weight.data[:k] = old.weight.data[:k]
        self.text_model.token_embedding = new
        return new

    def forward(self, input_ids, attention_mask=None, output_hidden_states=False):
        m = self.text_model
        seq = input_ids.shape[-1]
        x = m.token_embedding(input_ids) + m.position_embedding(m.position_ids[:, :seq])
        mask = torch.full((seq, seq), torch.finfo(x.dtype).min)
        cond = torch.arange(seq)
        mask.masked_fill_(cond < (cond + 1).view(seq, 1), 0)
        causal = mask[None, None, :, :].expand(input_ids.shape[0], 1, seq, seq)
        hidden = [x]  # modeling_clip.py CLIPEncoder: the embeddings, then each layer's output
        for layer in m.layers:
            x = layer(x, causal)
            hidden.append(x)
        last = m.final_layer_norm(x)
        pooled = last[torch.arange(last.shape[0]), input_ids.to(torch.int).argmax(dim=-1)]
        return (last, pooled, tuple(hidden)) if output_hidden_states else (last, pooled)


class Tokenizer:
    """transformers' `CLIPTokenizer` interface: added tokens, BOS/EOS, truncation, padding."""

    model_max_length = LENGTH

    def __init__(self, vocab_path, words):
        self.vocab = json.load(open(vocab_path))
        self.inverse = {i: t for t, i in self.vocab.items()}
        self.words = words
        self.added_tokens_encoder = {}

    def __len__(self):
        return len(self.vocab) + len(self.added_tokens_encoder)

    def get_vocab(self):
        return {**self.vocab, **self.added_tokens_encoder}

    def add_tokens(self, token):
        if token not in self.get_vocab():
            self.added_tokens_encoder[token] = len(self)
        return 1

    def convert_tokens_to_ids(self, token):
        return self.get_vocab()[token]

    def _split(self, text):
        """tokenization_utils.py `tokenize`: the text cut at added tokens (longest first)."""
        pieces, i, rest = [], 0, ""
        added = sorted(self.added_tokens_encoder, key=len, reverse=True)
        while i < len(text):
            hit = next((t for t in added if text.startswith(t, i)), None)
            if hit:
                pieces.append((rest, False))
                pieces.append((hit, True))
                rest, i = "", i + len(hit)
            else:
                rest += text[i]
                i += 1
        pieces.append((rest, False))
        return pieces

    def _ids(self, text):
        ids = []
        for piece, is_added in self._split(text):
            if is_added:
                ids.append(self.added_tokens_encoder[piece])
                continue
            for word in piece.lower().split():
                if word not in self.words:
                    raise SystemExit(f"the job's word table has no {word!r}")
                ids.extend(self.words[word])
        return ids

    def tokenize(self, text):
        return [self.inverse.get(i) or next(t for t, j in self.added_tokens_encoder.items() if j == i)
                for i in self._ids(text)]

    def __call__(self, text, padding=None, max_length=None, truncation=False, return_tensors=None):
        ids = self._ids(text)
        if truncation:
            ids = ids[: (max_length or LENGTH) - 2]
        ids = [BOS] + ids + [EOS]
        mask = [1] * len(ids)
        if padding == "max_length":
            pad = (max_length or LENGTH) - len(ids)
            ids, mask = ids + [EOS] * pad, mask + [0] * pad
        return types.SimpleNamespace(input_ids=torch.tensor([ids]), attention_mask=torch.tensor([mask]))

    def batch_decode(self, *a, **k):
        raise NotImplementedError("a prompt of this check was cut at 77 tokens")


def tiny_vae(path):
    """AutoencoderTiny whose decoder has the weights of a taesd_decoder.safetensors
    (convert_tiny_autoencoder_to_diffusers.py: `decoder.layers.{index - 1}.{rest}`)."""
    vae = AutoencoderTiny().eval()
    mapped = {}
    for k, v in safetensors_np.read(path).items():
        index, rest = k.split(".", 1)
        mapped[f"layers.{int(index) - 1}.{rest}"] = torch.from_numpy(v.astype(np.float32))
    vae.decoder.load_state_dict(mapped, strict=True)
    return vae


job = json.load(open(JOB))
os.makedirs(OUT, exist_ok=True)
result = {"torch": torch.__version__, "diffusers": diffusers.__version__, "runs": {}}
with torch.no_grad():
    t0 = time.time()
    models = sd15_torch.build({"text_encoder", "unet"}, job["export"])
    export = Path(job["export"])
    result["checked"] = {
        part: sd15_torch.check_against_export(models[part], export / part / "model.onnx")
        for part in ("text_encoder", "unet")
    }
    pipe = StableDiffusionPipeline(
        vae=tiny_vae(job["taesd"]),
        text_encoder=TextEncoder(models.pop("text_encoder")),
        tokenizer=Tokenizer(job["vocab"], job["words"]),
        unet=models.pop("unet"),
        scheduler=LCMScheduler.from_config(dx.SD15_SCHEDULER),
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    emb = job["embedding"]
    # diffusers' own layout of a learned_embeds file: {token: [n, 768]}.
    pipe.load_textual_inversion({emb["name"]: torch.tensor(emb["vectors"], dtype=torch.float32)})
    result["added_tokens"] = pipe.tokenizer.added_tokens_encoder
    result["load_s"] = time.time() - t0
    for run in job["runs"]:
        captured = {}
        decode, unet_forward = pipe.vae.decode, pipe.unet.forward

        def decode_and_keep(latents, *a, **k):
            captured["latents"] = latents.detach().clone()
            return decode(latents, *a, **k)

        def unet_and_keep(sample, t, encoder_hidden_states, *a, **k):
            captured.setdefault("embeds", encoder_hidden_states.detach().clone())
            return unet_forward(sample, t, encoder_hidden_states, *a, **k)

        pipe.vae.decode, pipe.unet.forward = decode_and_keep, unet_and_keep
        converted = pipe.maybe_convert_prompt(run["prompt"], pipe.tokenizer)
        ids = pipe.tokenizer(converted, padding="max_length", max_length=LENGTH, truncation=True).input_ids
        t1 = time.time()
        image = pipe(
            prompt=run["prompt"],
            height=job["size"],
            width=job["size"],
            num_inference_steps=job["steps"],
            guidance_scale=0,
            generator=torch.Generator().manual_seed(job["seed"]),
            output_type="np",
            clip_skip=run["clip_skip"],
        ).images[0]
        seconds = time.time() - t1
        pipe.vae.decode, pipe.unet.forward = decode, unet_forward
        (image * 255).round().astype("uint8").tofile(os.path.join(OUT, f"{run['name']}.rgb"))
        for key in ("latents", "embeds"):
            captured[key].numpy().astype("<f4").tofile(os.path.join(OUT, f"{run['name']}.{key}"))
        np.asarray(ids[0], dtype="<i4").tofile(os.path.join(OUT, f"{run['name']}.ids"))
        result["runs"][run["name"]] = {
            **run,
            "converted_prompt": converted,
            "seconds": seconds,
            "timesteps": [int(t) for t in pipe.scheduler.timesteps],
        }
        print(f"{run['name']}: {seconds:.1f} s", flush=True)
json.dump(result, open(os.path.join(OUT, "result.json"), "w"), indent=2)
shutil.rmtree(work)
