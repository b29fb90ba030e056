"""Writes diffusers_names.json: the original-layout name that diffusers' own conversion gives
each diffusers name of SD 1.5's UNet and VAE, and which VAE weights it reshapes to 1x1 convs;
sd15_keys_test.ts checks the key maps against it.

Usage (Python with torch; diffusers itself is not needed, only its script's source):

    python3 make_diffusers_names.py SCRIPT NAMES.json OUT.json

SCRIPT: huggingface/diffusers scripts/convert_diffusers_to_original_stable_diffusion.py.
NAMES.json: {"unet": [...], "vae": [...]}, the diffusers names (the test tooling's testSd15()
lists every name of SD 1.5). Its convert_unet_state_dict and convert_vae_state_dict run on
small tensors; each output is matched to its input by identity (or, for the reshaped VAE
weights, by the storage they share).
"""

import json
import sys
import types

import torch

script, names_path, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
source = open(script).read().split('if __name__ == "__main__":')[0]  # definitions only
# The script imports safetensors.torch at the top; nothing here uses it.
sys.modules["safetensors"] = types.ModuleType("safetensors")
sys.modules["safetensors.torch"] = types.ModuleType("safetensors.torch")
sys.modules["safetensors.torch"].load_file = sys.modules["safetensors.torch"].save_file = None
ns = {}
exec(compile(source, script, "exec"), ns)

names = json.load(open(names_path))


def inputs(keys):
    # Linear-shaped weights so the VAE reshape applies; every tensor has its own storage.
    return {k: torch.zeros(2, 2) if k.endswith("weight") else torch.zeros(2) for k in keys}


def pairs(converted, given):
    by_storage = {v.data_ptr(): k for k, v in given.items()}
    return sorted([by_storage[v.data_ptr()], k] for k, v in converted.items())


unet_in = inputs(names["unet"])
vae_in = inputs(names["vae"])
unet = ns["convert_unet_state_dict"](unet_in)
vae = ns["convert_vae_state_dict"](vae_in)
json.dump(
    {
        "source": "huggingface/diffusers scripts/convert_diffusers_to_original_stable_diffusion.py",
        "unet": pairs(unet, unet_in),
        "vae": pairs(vae, vae_in),
        "vae_reshaped_to_conv": sorted(k for k, v in vae.items() if v.dim() == 4),
    },
    open(out_path, "w"),
    indent=0,
)
