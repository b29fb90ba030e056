"""Exports a random-weight, full-size SD 1.5 the way diffusers' own
`scripts/convert_stable_diffusion_checkpoint_to_onnx.py` does, for
`deno task bench --full --fresh-export DIR`: the fresh-defaults scenario on
that exporter's graphs (the nodes ONNX Runtime plans its memory from), not
the project builder's.

    git -C diffusers archive v0.25.0 src scripts | tar -x -C "$tmp"
    /usr/bin/python3 bench/diffusers_export.py "$tmp" OUT_DIR

What runs is the script's own `onnx_export` (loaded from the checkout's
`scripts/` folder) with the script's arguments for each model: opset 14,
fp32 on the CPU, the UNet with `use_external_data_format` and then re-saved
into one `weights.pb`, the VAE encoder as `encode(sample)[0].sample()`, the
decoder as `decode`; the models are diffusers' own `UNet2DConditionModel` and
`AutoencoderKL` from the checkout, built from SD 1.5's configs with seeded
random weights (normal, std 0.02, so activations stay finite). The script
loads a pipeline from a folder instead; with random weights there is nothing
to load, and the safety checker is left out (the server does not run one).

The text encoder is the one part not from the checkout: transformers cannot
be installed where the Python package index is unreachable, so
`CLIPTextModel` is restated below as transformers v4.36 computes it
(`models/clip/modeling_clip.py`, eager attention: the causal mask of
`_make_causal_mask`, quick-GELU, the pooled output at the argmax of the ids),
and exported with the script's arguments (int32 `input_ids`, outputs
`last_hidden_state` and `pooler_output`).

`bench/diffusers_pipeline.py` imports this file's model builders
(`text_encoder()`, `unet()`, `vae()`) to run diffusers' own pipeline on the
same weights: each is seeded on its own, so the same diffusers checkout
builds the same tensors in either script.

Needs torch and onnx (Debian bookworm: python3-torch 1.13.1, python3-onnx
1.12; torch < 2.0 has no `scaled_dot_product_attention`, so diffusers runs
`AttnProcessor`, whose `baddbmm` the exporter writes with an all-zero addend:
what `mod/onnx/zero_addend.ts` removes). The few modules diffusers imports
but never uses for an export (huggingface_hub, safetensors, tqdm, filelock, regex,
packaging) are stubbed in a temporary folder when they are missing
(`bench/diffusers_offline.py`).
About 3 minutes and 10 GB of memory on a 2-core x86-64 VM.
"""
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

import onnx
import torch
from torch import nn

OPSET = 14  # the script's default --opset

# SD 1.5's `scheduler/scheduler_config.json` (runwayml/stable-diffusion-v1-5), the config the
# diffusers-side scripts build their schedulers from.
SD15_SCHEDULER = {
    "_class_name": "PNDMScheduler",
    "_diffusers_version": "0.6.0",
    "beta_end": 0.012,
    "beta_schedule": "scaled_linear",
    "beta_start": 0.00085,
    "num_train_timesteps": 1000,
    "set_alpha_to_one": False,
    "skip_prk_steps": True,
    "steps_offset": 1,
    "trained_betas": None,
    "clip_sample": False,
}


def setup(src):
    """Stubs what diffusers imports but does not use offline, puts the checkout `src` first."""
    work = tempfile.mkdtemp(prefix="diffusers-export-")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import diffusers_offline

    diffusers_offline.stub_missing(work)
    sys.path.insert(0, str(Path(src).resolve() / "src"))
    return work


class CLIPTextModel(nn.Module):
    """transformers v4.36 `CLIPTextModel` (SD 1.5's text config), eager attention."""

    class Attention(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads, self.head_dim = heads, d // heads
            self.scale = self.head_dim**-0.5
            self.k_proj, self.v_proj, self.q_proj, self.out_proj = (nn.Linear(d, d) for _ in range(4))

        def _shape(self, t, seq, bsz):
            return t.view(bsz, seq, self.heads, self.head_dim).transpose(1, 2).contiguous()

        def forward(self, x, causal):
            bsz, seq, d = x.size()
            q = self.q_proj(x) * self.scale
            k = self._shape(self.k_proj(x), -1, bsz)
            v = self._shape(self.v_proj(x), -1, bsz)
            shape = (bsz * self.heads, -1, self.head_dim)
            q = self._shape(q, seq, bsz).view(*shape)
            k, v = k.view(*shape), v.view(*shape)
            w = torch.bmm(q, k.transpose(1, 2)).view(bsz, self.heads, seq, seq) + causal
            w = nn.functional.softmax(w.view(bsz * self.heads, seq, seq), dim=-1)
            out = torch.bmm(w, v).view(bsz, self.heads, seq, self.head_dim).transpose(1, 2)
            return self.out_proj(out.reshape(bsz, seq, d))

    class Layer(nn.Module):
        def __init__(self, d, heads, ff):
            super().__init__()
            self.self_attn = CLIPTextModel.Attention(d, heads)
            self.layer_norm1 = nn.LayerNorm(d, eps=1e-5)
            self.fc1, self.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)
            self.layer_norm2 = nn.LayerNorm(d, eps=1e-5)

        def forward(self, x, causal):
            x = x + self.self_attn(self.layer_norm1(x), causal)
            h = self.fc1(self.layer_norm2(x))
            return x + self.fc2(h * torch.sigmoid(1.702 * h))  # quick_gelu

    def __init__(self, vocab=49408, d=768, heads=12, ff=3072, layers=12, positions=77):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, d)
        self.position_embedding = nn.Embedding(positions, d)
        self.register_buffer("position_ids", torch.arange(positions).expand((1, -1)), persistent=False)
        self.layers = nn.ModuleList(CLIPTextModel.Layer(d, heads, ff) for _ in range(layers))
        self.final_layer_norm = nn.LayerNorm(d, eps=1e-5)

    def forward(self, input_ids):
        shape = input_ids.size()
        input_ids = input_ids.view(-1, shape[-1])
        seq = shape[-1]
        x = self.token_embedding(input_ids) + self.position_embedding(self.position_ids[:, :seq])
        mask = torch.full((seq, seq), torch.finfo(x.dtype).min)
        cond = torch.arange(mask.size(-1))
        mask.masked_fill_(cond < (cond + 1).view(mask.size(-1), 1), 0)
        causal = mask.to(x.dtype)[None, None, :, :].expand(shape[0], 1, seq, seq)
        for layer in self.layers:
            x = layer(x, causal)
        x = self.final_layer_norm(x)
        ids = input_ids.to(dtype=torch.int).argmax(dim=-1)
        return x, x[torch.arange(x.shape[0]), ids]


def randomized(model):
    torch.manual_seed(1234)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.02)
    return model.eval()


def text_encoder():
    """The text encoder with its seeded random weights."""
    return randomized(CLIPTextModel())


def unet():
    """diffusers' `UNet2DConditionModel` with SD 1.5's config and seeded random weights."""
    from diffusers.models import UNet2DConditionModel

    return randomized(UNet2DConditionModel(
        sample_size=64, in_channels=4, out_channels=4, layers_per_block=2,
        down_block_types=("CrossAttnDownBlock2D",) * 3 + ("DownBlock2D",),
        up_block_types=("UpBlock2D",) + ("CrossAttnUpBlock2D",) * 3,
        block_out_channels=(320, 640, 1280, 1280), cross_attention_dim=768, attention_head_dim=8,
    ))


def vae():
    """diffusers' `AutoencoderKL` with SD 1.5's config and seeded random weights."""
    from diffusers.models import AutoencoderKL

    return randomized(AutoencoderKL(
        in_channels=3, out_channels=3, latent_channels=4, sample_size=512, layers_per_block=2,
        down_block_types=("DownEncoderBlock2D",) * 4, up_block_types=("UpDecoderBlock2D",) * 4,
        block_out_channels=(128, 256, 512, 512),
    ))


def export(src, out):
    """Exports the four models into `out` with the checkout's own `onnx_export`."""
    src, out = Path(src).resolve(), Path(out).resolve()
    spec = importlib.util.spec_from_file_location(
        "convert", src / "scripts" / "convert_stable_diffusion_checkpoint_to_onnx.py"
    )
    convert = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(convert)
    with torch.no_grad():
        _export(convert.onnx_export, out)


def _export(onnx_export, OUT):
    text_encoder_model = text_encoder()
    # "A sample prompt" as the script tokenizes it: BOS, three tokens, EOS, EOS padding.
    ids = torch.tensor([[49406, 320, 6077, 9716, 49407] + [49407] * 72], dtype=torch.int32)
    onnx_export(
        text_encoder_model,
        model_args=(ids,),
        output_path=OUT / "text_encoder" / "model.onnx",
        ordered_input_names=["input_ids"],
        output_names=["last_hidden_state", "pooler_output"],
        dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}},
        opset=OPSET,
    )
    del text_encoder_model

    unet_model = unet()
    unet_path = OUT / "unet" / "model.onnx"
    onnx_export(
        unet_model,
        model_args=(torch.randn(2, 4, 64, 64), torch.randn(2), torch.randn(2, 77, 768), False),
        output_path=unet_path,
        ordered_input_names=["sample", "timestep", "encoder_hidden_states", "return_dict"],
        output_names=["out_sample"],
        dynamic_axes={
            "sample": {0: "batch", 1: "channels", 2: "height", 3: "width"},
            "timestep": {0: "batch"},
            "encoder_hidden_states": {0: "batch", 1: "sequence"},
        },
        opset=OPSET,
        use_external_data_format=True,
    )
    del unet_model
    # As the script does: collate the external tensors into one weights.pb.
    model = onnx.load(str(unet_path))
    shutil.rmtree(unet_path.parent)
    os.mkdir(unet_path.parent)
    onnx.save_model(model, str(unet_path), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="weights.pb", convert_attribute=False)
    del model

    vae_model = vae()
    vae_model.forward = lambda sample, return_dict: vae_model.encode(sample, return_dict)[0].sample()
    onnx_export(
        vae_model,
        model_args=(torch.randn(1, 3, 512, 512), False),
        output_path=OUT / "vae_encoder" / "model.onnx",
        ordered_input_names=["sample", "return_dict"],
        output_names=["latent_sample"],
        dynamic_axes={"sample": {0: "batch", 1: "channels", 2: "height", 3: "width"}},
        opset=OPSET,
    )
    vae_model.forward = vae_model.decode
    onnx_export(
        vae_model,
        model_args=(torch.randn(1, 4, 64, 64), False),
        output_path=OUT / "vae_decoder" / "model.onnx",
        ordered_input_names=["latent_sample", "return_dict"],
        output_names=["sample"],
        dynamic_axes={"latent_sample": {0: "batch", 1: "channels", 2: "height", 3: "width"}},
        opset=OPSET,
    )


if __name__ == "__main__":
    work = setup(sys.argv[1])
    export(sys.argv[1], sys.argv[2])
    shutil.rmtree(work)
    print("exported to", Path(sys.argv[2]).resolve())
