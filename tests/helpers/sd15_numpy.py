"""SD 1.x in plain numpy (float64), written from the definitions the converter
follows and not from its graphs, for `tests/converted_reference_test.ts`:
diffusers `UNet2DConditionModel` (`unet_2d_condition.py`, `unet_2d_blocks.py`,
`resnet.py`, `attention.py`, `attention_processor.py`, `embeddings.py`),
`AutoencoderKL` (`autoencoders/vae.py`) and transformers `CLIPTextModel`
(`modeling_clip.py`), each module as torch computes it: a Linear is
x @ W.T + b, a Conv2d cross-correlates, GroupNorm and LayerNorm use the
biased variance.

    python3 sd15_numpy.py DIR TEXT_HEADS

DIR holds `weights.bin` (float32 tensors back to back) and `weights.json`
({name: [offset, shape]} in elements, diffusers names), `inputs.bin` and
`inputs.json` ({name: [offset, shape]}); writes `outputs.bin` and
`outputs.json` in the same form.
"""
import json
import math
import sys

import numpy as np

DIR = sys.argv[1]
TEXT_HEADS = int(sys.argv[2])
UNET_HEADS = 8
GROUPS = 32

INDEX = json.load(open(f"{DIR}/weights.json"))
BLOB = np.fromfile(f"{DIR}/weights.bin", dtype="<f4")
INPUT_INDEX = json.load(open(f"{DIR}/inputs.json"))
INPUT_BLOB = np.fromfile(f"{DIR}/inputs.bin", dtype="<f4")


def tensor(index, blob, name):
    offset, shape = index[name]
    n = int(np.prod(shape)) if shape else 1
    return blob[offset:offset + n].reshape(shape).astype(np.float64)


def W(name):
    return tensor(INDEX, BLOB, name)


def has(name):
    return name in INDEX


def count(prefix, suffix):
    n = 0
    while has(f"{prefix}{n}.{suffix}"):
        n += 1
    return n


def linear(x, p, bias=True):
    y = x @ W(f"{p}.weight").reshape(W(f"{p}.weight").shape[0], -1).T
    return y + W(f"{p}.bias") if bias else y


def conv(x, p, stride=1, pad=None):
    """torch Conv2d: `pad` = (top, left, bottom, right); default k // 2 on every side."""
    w = W(f"{p}.weight")
    b = W(f"{p}.bias")
    k = w.shape[2]
    t, l, bo, r = pad if pad is not None else (k // 2,) * 4
    xp = np.pad(x, ((0, 0), (0, 0), (t, bo), (l, r)))
    n, c, h, wd = xp.shape
    ho = (h - k) // stride + 1
    wo = (wd - k) // stride + 1
    cols = np.empty((n, c, k, k, ho, wo))
    for i in range(k):
        for j in range(k):
            cols[:, :, i, j] = xp[:, :, i:i + stride * ho:stride, j:j + stride * wo:stride]
    return np.einsum("ncijhw,ocij->nohw", cols, w) + b[None, :, None, None]


def group_norm(x, p, eps):
    n = x.shape[0]
    g = x.reshape(n, GROUPS, -1)
    y = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + eps)).reshape(x.shape)
    return y * W(f"{p}.weight")[None, :, None, None] + W(f"{p}.bias")[None, :, None, None]


def layer_norm(x, p, eps=1e-5):
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    return y * W(f"{p}.weight") + W(f"{p}.bias")


def silu(x):
    return x / (1 + np.exp(-x))


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


ERF = np.vectorize(math.erf)


def heads_of(t, heads):
    b, s, c = t.shape
    return t.reshape(b, s, heads, c // heads).transpose(0, 2, 1, 3)


def merge(t):
    b, h, s, d = t.shape
    return t.transpose(0, 2, 1, 3).reshape(b, s, h * d)


def attention(x, ctx, p, heads, bias=False):
    """diffusers `Attention` (AttnProcessor): softmax(q kᵀ · d^-0.5) v, then to_out.0."""
    q = heads_of(linear(x, f"{p}.to_q", bias), heads)
    k = heads_of(linear(ctx, f"{p}.to_k", bias), heads)
    v = heads_of(linear(ctx, f"{p}.to_v", bias), heads)
    d = q.shape[-1]
    return linear(merge(softmax(q @ k.transpose(0, 1, 3, 2) * d ** -0.5) @ v), f"{p}.to_out.0")


def resnet(x, p, temb, eps):
    h = conv(silu(group_norm(x, f"{p}.norm1", eps)), f"{p}.conv1")
    if temb is not None:
        h = h + linear(silu(temb), f"{p}.time_emb_proj")[:, :, None, None]
    h = conv(silu(group_norm(h, f"{p}.norm2", eps)), f"{p}.conv2")
    if has(f"{p}.conv_shortcut.weight"):
        x = conv(x, f"{p}.conv_shortcut")
    return x + h


def transformer(x, p, ctx):
    b, c, hh, ww = x.shape
    h = conv(group_norm(x, f"{p}.norm", 1e-6), f"{p}.proj_in")
    t = h.reshape(b, c, hh * ww).transpose(0, 2, 1)
    for i in range(count(f"{p}.transformer_blocks.", "norm1.weight")):
        blk = f"{p}.transformer_blocks.{i}"
        n = layer_norm(t, f"{blk}.norm1")
        t = t + attention(n, n, f"{blk}.attn1", UNET_HEADS)
        n = layer_norm(t, f"{blk}.norm2")
        t = t + attention(n, ctx, f"{blk}.attn2", UNET_HEADS)
        n = layer_norm(t, f"{blk}.norm3")
        hidden, gate = np.split(linear(n, f"{blk}.ff.net.0.proj"), 2, axis=-1)
        t = t + linear(hidden * 0.5 * gate * (1 + ERF(gate / math.sqrt(2))), f"{blk}.ff.net.2")
    h = t.transpose(0, 2, 1).reshape(b, c, hh, ww)
    return conv(h, f"{p}.proj_out") + x


def unet(sample, timestep, ctx, residuals=None):
    half = W("conv_in.weight").shape[0] // 2
    freqs = np.exp(-math.log(10000) * np.arange(half) / half)
    arg = timestep[:, None] * freqs[None]
    emb = np.concatenate([np.cos(arg), np.sin(arg)], axis=1)  # flip_sin_to_cos
    temb = linear(silu(linear(emb, "time_embedding.linear_1")), "time_embedding.linear_2")
    h = conv(sample, "conv_in")
    skips = [h]
    blocks = count("down_blocks.", "resnets.0.conv1.weight")
    layers = count("down_blocks.0.resnets.", "conv1.weight")
    for i in range(blocks):
        for j in range(layers):
            h = resnet(h, f"down_blocks.{i}.resnets.{j}", temb, 1e-5)
            if has(f"down_blocks.{i}.attentions.{j}.proj_in.weight"):
                h = transformer(h, f"down_blocks.{i}.attentions.{j}", ctx)
            skips.append(h)
        if has(f"down_blocks.{i}.downsamplers.0.conv.weight"):
            h = conv(h, f"down_blocks.{i}.downsamplers.0.conv", stride=2)
            skips.append(h)
    h = resnet(h, "mid_block.resnets.0", temb, 1e-5)
    h = transformer(h, "mid_block.attentions.0", ctx)
    h = resnet(h, "mid_block.resnets.1", temb, 1e-5)
    if residuals is not None:
        skips = [s + r for s, r in zip(skips, residuals[:-1])]
        h = h + residuals[-1]
    for i in range(blocks):
        for j in range(layers + 1):
            h = np.concatenate([h, skips.pop()], axis=1)
            h = resnet(h, f"up_blocks.{i}.resnets.{j}", temb, 1e-5)
            if has(f"up_blocks.{i}.attentions.{j}.proj_in.weight"):
                h = transformer(h, f"up_blocks.{i}.attentions.{j}", ctx)
        if has(f"up_blocks.{i}.upsamplers.0.conv.weight"):
            h = conv(h.repeat(2, axis=2).repeat(2, axis=3), f"up_blocks.{i}.upsamplers.0.conv")
    return conv(silu(group_norm(h, "conv_norm_out", 1e-5)), "conv_out")


def clip(ids):
    b, s = ids.shape
    x = W("text_model.embeddings.token_embedding.weight")[ids]
    x = x + W("text_model.embeddings.position_embedding.weight")[:s][None]
    mask = np.triu(np.full((s, s), -np.inf), 1)
    for layer in range(count("text_model.encoder.layers.", "self_attn.q_proj.weight")):
        p = f"text_model.encoder.layers.{layer}"
        n = layer_norm(x, f"{p}.layer_norm1")
        q = heads_of(linear(n, f"{p}.self_attn.q_proj"), TEXT_HEADS)
        k = heads_of(linear(n, f"{p}.self_attn.k_proj"), TEXT_HEADS)
        v = heads_of(linear(n, f"{p}.self_attn.v_proj"), TEXT_HEADS)
        d = q.shape[-1]
        a = softmax((q * d ** -0.5) @ k.transpose(0, 1, 3, 2) + mask) @ v
        x = x + linear(merge(a), f"{p}.self_attn.out_proj")
        f = linear(layer_norm(x, f"{p}.layer_norm2"), f"{p}.mlp.fc1")
        x = x + linear(f * (1 / (1 + np.exp(-1.702 * f))), f"{p}.mlp.fc2")  # quick_gelu
    last = layer_norm(x, "text_model.final_layer_norm")
    return last, last[np.arange(b), ids.argmax(-1)]


def vae_mid(h, p):
    h = resnet(h, f"{p}.resnets.0", None, 1e-6)
    b, c, hh, ww = h.shape
    n = group_norm(h, f"{p}.attentions.0.group_norm", 1e-6).reshape(b, c, hh * ww).transpose(0, 2, 1)
    a = attention(n, n, f"{p}.attentions.0", 1, bias=True)
    h = h + a.transpose(0, 2, 1).reshape(b, c, hh, ww)
    return resnet(h, f"{p}.resnets.1", None, 1e-6)


def vae_decode(z):
    h = conv(conv(z, "post_quant_conv"), "decoder.conv_in")
    h = vae_mid(h, "decoder.mid_block")
    for i in range(count("decoder.up_blocks.", "resnets.0.conv1.weight")):
        for j in range(count(f"decoder.up_blocks.{i}.resnets.", "conv1.weight")):
            h = resnet(h, f"decoder.up_blocks.{i}.resnets.{j}", None, 1e-6)
        if has(f"decoder.up_blocks.{i}.upsamplers.0.conv.weight"):
            h = conv(h.repeat(2, axis=2).repeat(2, axis=3), f"decoder.up_blocks.{i}.upsamplers.0.conv")
    return conv(silu(group_norm(h, "decoder.conv_norm_out", 1e-6)), "decoder.conv_out")


def vae_encode(x):
    """The latent distribution's parameters (mean ‖ logvar) after quant_conv."""
    h = conv(x, "encoder.conv_in")
    for i in range(count("encoder.down_blocks.", "resnets.0.conv1.weight")):
        for j in range(count(f"encoder.down_blocks.{i}.resnets.", "conv1.weight")):
            h = resnet(h, f"encoder.down_blocks.{i}.resnets.{j}", None, 1e-6)
        if has(f"encoder.down_blocks.{i}.downsamplers.0.conv.weight"):
            # Downsample2D(padding=0): F.pad(x, (0, 1, 0, 1)), then the stride-2 conv.
            h = conv(h, f"encoder.down_blocks.{i}.downsamplers.0.conv", stride=2, pad=(0, 0, 1, 1))
    h = vae_mid(h, "encoder.mid_block")
    h = conv(silu(group_norm(h, "encoder.conv_norm_out", 1e-6)), "encoder.conv_out")
    return conv(h, "quant_conv")


def inp(name):
    return tensor(INPUT_INDEX, INPUT_BLOB, name)


residuals = [inp(f"residual_{i}") for i in range(13)]
last, pooled = clip(inp("input_ids").astype(np.int64))
outputs = {
    "text_encoder.last_hidden_state": last,
    "text_encoder.pooler_output": pooled,
    "unet.out_sample": unet(inp("sample"), inp("timestep"), inp("encoder_hidden_states")),
    "controlnet_unet.out_sample": unet(
        inp("sample"), inp("timestep"), inp("encoder_hidden_states"), residuals),
    "vae_decoder.sample": vae_decode(inp("latent_sample")),
    "vae_encoder.latent_parameters": vae_encode(inp("image")),
}
index = {}
offset = 0
with open(f"{DIR}/outputs.bin", "wb") as f:
    for name, value in outputs.items():
        data = np.ascontiguousarray(value, dtype="<f4")
        f.write(data.tobytes())
        index[name] = [offset, list(value.shape)]
        offset += data.size
json.dump(index, open(f"{DIR}/outputs.json", "w"))
