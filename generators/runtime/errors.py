"""The error classes a user can meet, in one place: each is an answer (one line "error: ..."
from the command line, exit code 2), not a bug. Every module raises them from here;
:data:`USER_ERRORS` is what ``generators.__main__`` catches.

The board's (:class:`generators.host.BoardError`) and the simulators'
(:class:`generators.cosim.tools.ToolError`) live with the code outside the runtime that raises them and are named here too.
"""
from __future__ import annotations

from typing import Optional

from generators.cosim.tools import ToolError
from generators.host import BoardError

__all__ = ["UsageError", "CheckpointError", "GGUFError", "TokenizerError", "ImageError",
           "ContextFitError", "PromptError", "ContextError", "EngineError", "BackendError",
           "DmaError", "DmaHangError", "DmaShortError", "SimLinkError", "DmaResetError",
           "BoardError", "ToolError", "USER_ERRORS"]


class UsageError(ValueError):
    """A mistake on the command line (the message is the whole answer)."""


class CheckpointError(ValueError):
    """The checkpoint is not one the runtime can run (names the field or tensor)."""


class GGUFError(ValueError):
    """A GGUF file the runtime cannot read: the message names the field, tensor or type."""


class TokenizerError(ValueError):
    """A vocabulary or template the runtime cannot use: the message names the field."""


class ImageError(ValueError):
    """A file that is not a model image this runtime reads (names the file and the problem)."""


class ContextFitError(ValueError):
    """The plan does not fit the budgets (the message is the one-line refusal)."""


class PromptError(ValueError):
    """A prompt without tokens, or with an id outside the vocabulary."""


class ContextError(ValueError):
    """The prompt does not fit the attention engine's max_context."""


class EngineError(RuntimeError):
    """An engine answered with error flags, a wrong count or a wrong tag."""


class BackendError(RuntimeError):
    """A backend that cannot be made or run (its arguments, its link, its DMAs)."""


class DmaError(BackendError):
    """A DMA transfer failed twice (an error bit); ``info`` holds what was seen."""

    def __init__(self, message: str, info: Optional[dict] = None):
        super().__init__(message)
        self.info = info or {}


class DmaHangError(DmaError):
    """A DMA transfer did not complete within the timeout, twice."""


class DmaShortError(DmaError):
    """A DMA transfer moved fewer bytes than its descriptors (or an output frame overran its
    slot), twice."""


class SimLinkError(BackendError):
    """The simulator did not answer within the link's timeout, or the link broke."""


class DmaResetError(RuntimeError):
    """A DMA did not come out of reset, or a channel would not start."""


#: the runtime's errors that are an answer to the user, not a bug: printed as one line
#: "error: ..." by the command line, exit code 2 (generators/__main__.py)
USER_ERRORS = (UsageError, BackendError, BoardError, CheckpointError, ContextError, EngineError,
               GGUFError, ImageError, PromptError, TokenizerError, ToolError)
