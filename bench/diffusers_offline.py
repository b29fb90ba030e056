"""Stand-ins for the packages diffusers imports at package level but never
uses offline (huggingface_hub, safetensors, tqdm, filelock, regex,
packaging), for the scripts that run diffusers' own code from a source
checkout where the Python package index is unreachable:
`bench/diffusers_export.py` and
`mod/pipeline/testdata/make_img2img_reference.py`.

    import diffusers_offline
    diffusers_offline.stub_missing(work)   # then sys.path gets `work` first

Only a package that is not installed is stubbed; an installed one is used.
"""
import os
import sys

HUB = '''import re as _re
def _identity(*a, **k):
    return a[0] if len(a) == 1 and callable(a[0]) and not k else None
def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    if name.isupper():
        return _re.compile("x") if "REGEX" in name else "/nonexistent"
    return _identity
'''
UNUSED = "def __getattr__(name):\n    raise NotImplementedError(name)\n"

STUBS = {
    "huggingface_hub": {f"{m}.py": HUB for m in ("__init__", "constants", "utils", "file_download")},
    "safetensors": {"__init__.py": '__version__ = "0.4.1"\n' + UNUSED, "torch.py": UNUSED},
    "tqdm": {
        # The pipelines' progress bar: a context manager with update() (nothing is drawn).
        "__init__.py": "class tqdm:\n    def __init__(self, *a, **k):\n        pass\n"
        "    def __enter__(self):\n        return self\n"
        "    def __exit__(self, *a):\n        return False\n"
        "    def update(self, *a, **k):\n        pass\n"
        "    def close(self):\n        pass\n",
        "auto.py": "from . import tqdm\n",
    },
    "filelock": {"__init__.py": "def __getattr__(name):\n    return None\n"},
    "regex": {"__init__.py": "from re import *\n"},
}


def stub_missing(work):
    """Writes the stand-ins of the missing packages into `work` and puts it first on sys.path."""
    for name, files in STUBS.items():
        try:
            __import__(name)
        except ImportError:
            os.makedirs(os.path.join(work, name), exist_ok=True)
            for file, text in files.items():
                with open(os.path.join(work, name, file), "w") as f:
                    f.write(text)
    try:
        import packaging.version  # noqa: F401
    except ImportError:
        import pip._vendor.packaging as vendored

        os.symlink(os.path.dirname(vendored.__file__), os.path.join(work, "packaging"))
    sys.path.insert(0, work)


TRANSFORMERS = '''__version__ = "4.36.0"
class _StandIn:
    def __init__(self, *a, **k):
        pass
    @classmethod
    def from_pretrained(cls, *a, **k):
        raise NotImplementedError(cls.__name__)
def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return type(name, (_StandIn,), {})
'''
TRANSFORMERS_UTILS = '''def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return name.lower() if name.isupper() else (lambda *a, **k: None)
'''
# The names the pipeline modules import from safetensors exist and fail only when
# called (the scripts read LoRA, TAESD and embedding files with numpy).
CALL_FAILS = '''def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    def unused(*a, **k):
        raise NotImplementedError(name)
    return unused
'''


def stand_in_transformers(work):
    """For the scripts that import diffusers' pipeline modules (`diffusers_pipeline.py`,
    `diffusers_prompt.py`), after `stub_missing(work)`: a `transformers` stand-in in `work`
    (the classes those modules import, never used by the scripts; with a package record so
    diffusers counts it as installed) and a safetensors stand-in whose names exist and fail
    only when called."""
    import importlib

    if os.path.isdir(os.path.join(work, "safetensors")):
        for name in ("__init__.py", "torch.py"):
            with open(os.path.join(work, "safetensors", name), "w") as f:
                f.write(('__version__ = "0.4.1"\n' if name == "__init__.py" else "") + CALL_FAILS)
    os.makedirs(os.path.join(work, "transformers"), exist_ok=True)
    with open(os.path.join(work, "transformers", "__init__.py"), "w") as f:
        f.write(TRANSFORMERS)
    with open(os.path.join(work, "transformers", "utils.py"), "w") as f:
        f.write(TRANSFORMERS_UTILS)
    os.makedirs(os.path.join(work, "transformers-4.36.0.dist-info"), exist_ok=True)
    with open(os.path.join(work, "transformers-4.36.0.dist-info", "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: transformers\nVersion: 4.36.0\n")
    importlib.invalidate_caches()
