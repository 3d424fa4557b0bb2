"""The engines: the DMA driver and runtime, the memory plan, the C loop, and one module per thing that answers the registers (golden, rtl, board, golden-server, replay), found by name in the registry."""
# each backend module registers itself (registry.register_backend) when it is imported here
from . import golden, rtl, board, golden_server, replay  # noqa: F401
from .registry import make_backend, register_backend

__all__ = ["make_backend", "register_backend"]
