"""Reads and writes `.safetensors` files with numpy alone (the `safetensors`
package is not installable where the Python package index is unreachable):
an 8-byte little-endian header length, a JSON header of
`{name: {"dtype", "shape", "data_offsets": [begin, end]}}` (offsets into the
data that follows it), then the tensors' bytes
(huggingface/safetensors README, "Format").
"""
import json
import struct

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}
NAMES = {np.dtype(v): k for k, v in DTYPES.items()}


def read(path):
    """`{name: numpy array}` of a file, little-endian. Each tensor is read from the file into its
    own array, so a file is held once (its tensors), and no mapping of it counts in the RSS."""
    out = {}
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        for name, info in header.items():
            if name == "__metadata__":
                continue
            begin, end = info["data_offsets"]
            array = np.empty(info["shape"], dtype=np.dtype(DTYPES[info["dtype"]]).newbyteorder("<"))
            raw = array.reshape(-1).view(np.uint8)
            if raw.nbytes != end - begin:
                raise ValueError(f"{path}: {name} has {end - begin} bytes for shape {info['shape']}")
            f.seek(8 + n + begin)
            if f.readinto(raw) != raw.nbytes:
                raise ValueError(f"{path}: {name} runs past the end of the file")
            out[name] = array
    return out


def write(path, tensors, metadata=None):
    """Writes `{name: numpy array or torch tensor}` in the given order, padding the header to 8
    bytes as the reference writer does."""
    arrays = {}
    for name, t in tensors.items():
        a = t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)
        arrays[name] = np.ascontiguousarray(a)
    header = {"__metadata__": metadata} if metadata else {}
    offset = 0
    for name, a in arrays.items():
        header[name] = {
            "dtype": NAMES[a.dtype],
            "shape": list(a.shape),
            "data_offsets": [offset, offset + a.nbytes],
        }
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for a in arrays.values():
            f.write(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())
