#!/usr/bin/env python3
"""Regenerates the PIL resize fixtures of mod/image (lanczos_test.ts, nearest_test.ts).

Run from the repository root with Debian's Python and PIL (`apt-get install python3-pil`;
the committed files were made with Pillow 9.4.0, Debian 12):

    /usr/bin/python3 mod/image/testdata/make_pil_resize.py
    deno fmt mod/image/testdata

Outputs (both in this folder):
- pil_resize.json: one entry per case (filter, mode, input kind, source and target size, where
  its pixels lie in the blob, and the byte sum of the input so a drifted input formula shows
  up as such);
- pil_resize.bin.gz: PIL's output pixels of every case, concatenated (gzip, mtime 0).

Inputs are integer formulas shared with `pil_fixtures.ts` (`sourceImage`), so only PIL's outputs
are stored. The TypeScript tests never need Python.
"""
import gzip
import json
import os

import PIL
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))


def value(kind, x, y, c):
    """One 8-bit sample of the synthetic input `kind` (mirrored in pil_fixtures.ts)."""
    if kind == "pattern":
        # Ramps with wrap-around jumps (255 -> 0) and a small texture.
        return (x * 37 + y * 61 + c * 89 + ((x * y * 7 + c * 13) % 23) * 5) % 256
    if kind == "edges":
        # Hard 0/255 blocks, 3x5 in channel 0, shifted per channel, plus a white 1-pixel grid.
        if x % 11 == 10 or y % 7 == 6:
            return 255
        return ((x // 3 + y // 5 + c) % 2) * 255
    if kind == "noise":
        # Bits 13..20 of a polynomial hash (exact in JS doubles for sides up to a few thousand).
        h = x * x * 7919 + x * 1103515245 + y * y * 104729 + y * 12345 + c * 2654435761 + x * y * 31337
        return (h >> 13) & 255
    if kind == "checker":
        # The 64/192 checkerboard of decode_test.ts, one pixel per square.
        return 192 if (x + y) % 2 else 64
    raise ValueError(kind)


def source(kind, mode, w, h):
    channels = 3 if mode == "RGB" else 1
    data = bytes(value(kind, x, y, c) for y in range(h) for x in range(w) for c in range(channels))
    return Image.frombytes(mode, (w, h), data), sum(data)


# (filter, mode, kind, source size, target size)
CASES = [
    # Lanczos, shrinking
    ("lanczos", "RGB", "pattern", (97, 61), (32, 20)),
    ("lanczos", "RGB", "noise", (640, 480), (64, 48)),
    ("lanczos", "RGB", "edges", (301, 203), (128, 96)),
    ("lanczos", "RGB", "noise", (1000, 20), (7, 5)),
    ("lanczos", "L", "edges", (255, 129), (77, 31)),
    ("lanczos", "L", "noise", (64, 64), (63, 63)),
    # Lanczos, enlarging (libvips uses its bicubic interpolator here)
    ("lanczos", "RGB", "edges", (30, 20), (256, 192)),
    ("lanczos", "RGB", "pattern", (37, 23), (100, 61)),
    ("lanczos", "RGB", "checker", (8, 8), (128, 128)),
    ("lanczos", "RGB", "noise", (63, 63), (64, 64)),
    ("lanczos", "L", "edges", (13, 9), (200, 151)),
    ("lanczos", "L", "checker", (8, 8), (64, 64)),
    # Lanczos, one axis up and the other down; one axis unchanged (that pass is skipped)
    ("lanczos", "RGB", "pattern", (64, 17), (23, 50)),
    ("lanczos", "RGB", "edges", (33, 40), (33, 19)),
    ("lanczos", "L", "noise", (40, 33), (17, 33)),
    # Lanczos, one-pixel-wide and one-pixel-high inputs and outputs
    ("lanczos", "RGB", "noise", (1, 37), (5, 64)),
    ("lanczos", "RGB", "noise", (1, 1), (7, 3)),
    ("lanczos", "RGB", "edges", (40, 1), (13, 1)),
    ("lanczos", "RGB", "edges", (1, 50), (1, 17)),
    ("lanczos", "L", "noise", (1, 300), (512, 512)),
    ("lanczos", "L", "edges", (57, 43), (1, 1)),
    ("lanczos", "RGB", "pattern", (20, 10), (20, 10)),
    # Lanczos, more than 100 times as tall as wide and shrinking vertically: vertical pass
    # first, as Pillow >= 12.2 does (see `resize`); (1, 300) -> (512, 512) above grows instead.
    ("lanczos", "RGB", "noise", (3, 400), (5, 64)),
    ("lanczos", "L", "noise", (2, 250), (40, 9)),
    ("lanczos", "RGB", "edges", (2, 201), (3, 200)),
    ("lanczos", "RGB", "noise", (1, 500), (1, 77)),
    # Nearest (PIL's affine scale with pixel centres)
    ("nearest", "L", "noise", (37, 23), (512, 384)),
    ("nearest", "L", "noise", (512, 384), (37, 23)),
    ("nearest", "L", "edges", (1, 5), (3, 16)),
    ("nearest", "L", "noise", (7, 3), (1, 1)),
    ("nearest", "L", "noise", (3, 7), (1000, 999)),
    ("nearest", "RGB", "pattern", (97, 61), (64, 77)),
]


def resize(image, size, resample):
    """`image.resize(size, resample)` as Pillow >= 12.2 does it (Image.resize, "Resize tall
    images vertically first"): an image more than 100 times as tall as wide that shrinks
    vertically is resized vertically first, then horizontally. Older Pillow (Debian 12 has
    9.4.0) runs the horizontal pass first for every image, so the two steps are spelled out."""
    w, h = image.size
    if resample != Image.NEAREST and h > w * 100 and size[1] < h:
        return image.resize((w, size[1]), resample).resize(size, resample)
    return image.resize(size, resample)


def main():
    cases = []
    blob = bytearray()
    for filt, mode, kind, src, dst in CASES:
        image, input_sum = source(kind, mode, *src)
        resample = Image.LANCZOS if filt == "lanczos" else Image.NEAREST
        out = resize(image, dst, resample).tobytes()
        cases.append({
            "filter": filt,
            "mode": mode,
            "kind": kind,
            "src": list(src),
            "dst": list(dst),
            "inputSum": input_sum,
            "offset": len(blob),
            "length": len(out),
        })
        blob += out
    with open(os.path.join(HERE, "pil_resize.json"), "w") as fh:
        json.dump({"pillow": PIL.__version__, "cases": cases}, fh, indent=2)
        fh.write("\n")
    with gzip.GzipFile(os.path.join(HERE, "pil_resize.bin.gz"), "wb", mtime=0) as fh:
        fh.write(bytes(blob))


if __name__ == "__main__":
    main()
