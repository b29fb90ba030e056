"""Writes the small PyTorch files the checkpoint reader's tests read (torch_files_test.ts).

Made with torch.save itself (PyTorch 1.13, numpy 1.x), so the tests read what PyTorch writes,
not only what the project's own test writer produces. Run from this folder:

    python3 make_torch_files.py

Values are (arange(n) - k) / 8, which every dtype used here holds exactly; the test computes the
same values.
"""

import collections
import os

import numpy as np
import torch


def vals(n, k):
    return (torch.arange(n, dtype=torch.float32) - k) / 8


def ldm_like():
    sd = collections.OrderedDict()
    sd["f32"] = vals(6, 3).reshape(2, 3)
    sd["f16"] = vals(4, 1).half()
    sd["bf16"] = vals(5, 2).bfloat16().reshape(5, 1)
    big = vals(12, 0).reshape(3, 4)
    sd["row"] = big[1]  # a view: storage offset 4 into a 12-element storage
    sd["big"] = big  # the same storage, whole
    sd["param"] = torch.nn.Parameter(vals(3, 0), requires_grad=False)
    sd["ids"] = torch.arange(4).reshape(1, 4)  # int64
    sd["scalar"] = torch.tensor(2.5)
    sd["f64"] = vals(2, 0).double()
    sd["flag"] = torch.tensor([True, False])
    return {
        "epoch": 3,
        "global_step": 840000,
        "pytorch-lightning_version": "1.4.2",
        "state_dict": sd,
        "loss": np.float64(0.25),  # numpy scalar: numpy.core.multiarray.scalar + numpy.dtype + _codecs.encode
        "hparams": {"names": {"a", "b"}},  # builtins.set
        "optimizer_states": [{"state": {0: {"exp_avg": vals(2, 0)}}, "param_groups": [{"lr": 1e-4}]}],
    }


def lightning_callbacks():
    """What PyTorch Lightning 1.x checkpoints carry besides the weights: a ModelCheckpoint object
    (pickled by class reference, NEWOBJ + BUILD) holding a tensor on the GPU. The class is a
    stand-in registered under Lightning's module name, so the pickle names the global exactly as
    Lightning's own would."""
    import sys
    import types

    names = ["pytorch_lightning", "pytorch_lightning.callbacks", "pytorch_lightning.callbacks.model_checkpoint"]
    for n in names:
        sys.modules.setdefault(n, types.ModuleType(n))

    class ModelCheckpoint:
        pass

    ModelCheckpoint.__module__ = names[2]
    ModelCheckpoint.__qualname__ = "ModelCheckpoint"
    sys.modules[names[2]].ModelCheckpoint = ModelCheckpoint
    cb = ModelCheckpoint()
    cb.monitor = "val/loss"
    cb.best_model_score = torch.tensor(0.125)
    cb.kth_best_model_path = ""
    return {"ModelCheckpoint": cb}


class Evil:
    """What a malicious checkpoint does: pickle calls os.system when loaded."""

    def __reduce__(self):
        return (os.system, ("touch /tmp/sd15-checkpoint-evil-ran",))


def main():
    torch.save(ldm_like(), "ldm_zip.ckpt")
    lightning = ldm_like()
    lightning["callbacks"] = lightning_callbacks()
    torch.save(lightning, "ldm_lightning.ckpt")
    torch.save(ldm_like(), "ldm_legacy.ckpt", _use_new_zipfile_serialization=False)
    torch.save(ldm_like(), "ldm_protocol4.ckpt", pickle_protocol=4)
    module = torch.nn.Sequential(torch.nn.Linear(2, 3)).half()
    with torch.no_grad():
        module[0].weight.copy_(vals(6, 2).reshape(3, 2))
        module[0].bias.copy_(vals(3, 1))
    torch.save(module.state_dict(), "module_state_dict.bin")  # OrderedDict with _metadata (BUILD)
    torch.save({"t": vals(6, 0).reshape(2, 3).t()}, "transposed.pt")  # stride (1, 3)
    torch.save({"state_dict": {"w": vals(2, 0)}, "x": Evil()}, "evil.ckpt")


if __name__ == "__main__":
    main()
