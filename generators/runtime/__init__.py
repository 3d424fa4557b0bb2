"""Running a model on the engines: checkpoint reader, conversion, decoder step, backends.

    from generators.runtime import load_checkpoint, convert, make_backend, Decoder
    ckpt  = load_checkpoint(path)          # HF folder (config.json + model.safetensors) or .gguf
    model = convert(ckpt, fmt="int8")      # or "ternary"; Model.save / Model.load
    be    = make_backend("golden", model)  # "golden" | "rtl" | "board"
    dec   = Decoder(model, be)
    for tok in dec.generate(prompt_ids, max_new_tokens=8): ...

docs/runtime.md has the numerics (where each rounding happens) and the host protocol.
"""
from .checkpoint import (Checkpoint, CheckpointError, EngineConfig, ModelConfig, PYNQ_Z1_ENGINES,
                         load_checkpoint)
from .model import Model, QMatrix, convert
from .decoder import ContextError, Decoder, EngineError
from .backends import make_backend

__all__ = ["Checkpoint", "CheckpointError", "EngineConfig", "ModelConfig", "PYNQ_Z1_ENGINES",
           "load_checkpoint", "Model", "QMatrix", "convert", "Decoder", "EngineError",
           "ContextError", "make_backend"]
