"""Running a model on the engines: checkpoint reader, conversion, decoder step, backends.

    from generators.runtime import load_checkpoint, convert, make_backend, Decoder
    ckpt  = load_checkpoint(path)          # HF folder (config.json + model.safetensors) or .gguf
    model = convert(ckpt, fmt="int8")      # or "ternary"; Model.save / Model.load
    be    = make_backend("golden", model)  # "golden" | "rtl" | "board"
    dec   = Decoder(model, be)
    for tok in dec.generate(prompt_ids, max_new_tokens=8): ...

The layers, each importing only those below it (tests/runtime/test_layers.py checks every
import): errors, optional < host < model < engines < decode < cli < bench; docs/runtime.md has
the picture, the numerics (where each rounding happens) and the host protocol.
"""
from .errors import CheckpointError, ContextError, EngineError
from .model.checkpoint import (Checkpoint, EngineConfig, ModelConfig, PYNQ_Z1_ENGINES,
                               load_checkpoint)
from .model.model import Model, QMatrix, convert
from .engines import make_backend
from .decode.decoder import Decoder

__all__ = ["Checkpoint", "CheckpointError", "EngineConfig", "ModelConfig", "PYNQ_Z1_ENGINES",
           "load_checkpoint", "Model", "QMatrix", "convert", "Decoder", "EngineError",
           "ContextError", "make_backend"]
