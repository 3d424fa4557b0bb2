"""Every design the generator knows; importing this package registers them."""
from . import probe, int8, ternary, mv, q4  # noqa: F401

try:  # the attention engine registers itself when its module is present
    from . import attention  # noqa: F401
except ImportError as exc:  # pragma: no cover - only while the module is being written
    if "attention" not in str(exc):
        raise
else:
    from . import overlay  # noqa: F401  (needs the attention engine)
