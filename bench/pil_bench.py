#!/usr/bin/env python3
"""PIL's side of `deno bench bench/image_bench.ts`: the reference input path, timed in the
same run as ours.

Started once by the bench with the paths of the test JPEG and PNG; it reads both files into
memory, then answers one command per line on stdin with "ok" on stdout once done:
- `decode_resize <name>`: `Image.open` of the in-memory file, `convert("RGB")` when the file is
  not RGB already, and `resize((512, 512), Image.LANCZOS)`, as diffusers' image processor does;
- `decode <name>`: the decode alone (`Image.open(...).load()`);
- `resize <name>`: the resize alone, of the image decoded once at start.
It exits at end of input.
"""
import io
import sys

import PIL
from PIL import Image

SIZE = (512, 512)


def decode(data):
    image = Image.open(io.BytesIO(data))
    image.load()
    return image if image.mode == "RGB" else image.convert("RGB")


def main():
    files = {}
    for arg in sys.argv[1:]:
        name, path = arg.split("=", 1)
        with open(path, "rb") as fh:
            files[name] = fh.read()
    decoded = {name: decode(data) for name, data in files.items()}
    print("ready", PIL.__version__, flush=True)
    for line in sys.stdin:
        command, name = line.split()
        if command == "decode_resize":
            decode(files[name]).resize(SIZE, Image.LANCZOS)
        elif command == "decode":
            decode(files[name])
        elif command == "resize":
            decoded[name].resize(SIZE, Image.LANCZOS)
        else:
            raise ValueError(command)
        print("ok", flush=True)


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):
        pass  # the bench ended first
