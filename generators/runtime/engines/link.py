"""The socket link to a register server in another process (the rtl backend's simulator, the
golden register server, the board self test's stand-in): requests answered within a timeout
(:class:`SimLinkError`), register accesses over it (:class:`RemoteMmio`), and DDR as a file both
processes map."""
from __future__ import annotations

import socket
import tempfile
import time
from multiprocessing.connection import Listener
from pathlib import Path

from ..errors import BackendError, SimLinkError
from .plan import memory_plan
from .regmodel import Memory

__all__ = ["SimLink", "RemoteMmio", "accept", "shared_ddr", "hang_up"]


class SimLink:
    """The socket to a register server (the simulator process, or a golden one): requests
    and their answers, each answer awaited at most ``timeout_s``."""

    def __init__(self, conn, timeout_s: float, what: str = "the simulator"):
        self.conn, self.timeout_s, self.what = conn, timeout_s, what

    def send(self, msg) -> None:
        try:
            self.conn.send(msg)
        except (OSError, EOFError) as exc:
            raise SimLinkError(f"the link to {self.what} broke: {exc}") from None

    def ask(self, msg):
        self.send(msg)
        try:
            if not self.conn.poll(self.timeout_s):
                raise SimLinkError(f"{self.what} did not answer {msg[0]!r} within "
                                   f"{self.timeout_s} s")
            reply = self.conn.recv()
        except (OSError, EOFError) as exc:
            raise SimLinkError(f"the link to {self.what} broke: {exc}") from None
        if isinstance(reply, tuple) and reply and reply[0] == "error":
            raise SimLinkError(f"{self.what}: {reply[1]}")
        return reply


class RemoteMmio:
    """pynq.MMIO's read/write, forwarded to the register model across a :class:`SimLink`."""

    def __init__(self, link: SimLink, port: int):
        self.link, self.port = link, port

    def write(self, offset: int, value: int) -> None:
        self.link.send(("w", self.port, int(offset), int(value)))

    def read(self, offset: int, length: int = 4) -> int:
        return self.link.ask(("r", self.port, int(offset)))


def accept(listener: Listener, alive, timeout_s: float, what: str):
    """The register server's connection, or BackendError when it died or never came."""
    listener._listener._socket.settimeout(1.0)
    t0 = time.monotonic()
    while True:
        try:
            return listener.accept()
        except (socket.timeout, TimeoutError):
            if not alive():
                raise BackendError(f"{what} ended before connecting")
            if time.monotonic() - t0 > timeout_s:
                raise BackendError(f"{what} did not connect within {timeout_s} s")


def shared_ddr(be, model, context, prefix, vectors=None, streams=1):
    """The plan, a folder with DDR (a file both processes map, ``be.memory``) and the
    listener the register server connects to."""
    plan = memory_plan(model, context, vectors, streams)
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    be._tmp = tmp
    be.memory = Memory(str(tmp / "ddr"), plan.ddr_bytes)
    sock = str(tmp / "sock")
    return plan, tmp, plan.ddr_bytes, sock, Listener(sock, "AF_UNIX")


def hang_up(be, join) -> None:
    """Say goodbye to the register server, wait for it (``join``), drop DDR and the folder."""
    if getattr(be, "conn", None) is not None:
        try:
            be.link.ask(("q",))
        except BackendError:
            pass
        be.conn.close()
        be.conn = None
    join()
    be.memory.close()
    for f in be._tmp.iterdir():
        f.unlink()
    be._tmp.rmdir()
