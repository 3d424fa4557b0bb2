"""What a backend's DMAs send: a spy on the golden fabric's ``send`` for the runtime's tests."""
from __future__ import annotations

ATTENTION_MAGICS = (0xA77E, 0xA77F)     # an attention frame's port-0 half, its route word


def spy_attention_frames(be) -> dict:
    """Install a spy on ``be.fabric.send`` (a golden backend) and return ``{0: [], 1: []}``,
    where each port's list gets the bytes of every attention frame half the DMAs send through
    that port (gathered from DMA memory, as the engine would read them), the sends unchanged."""
    sent = {0: [], 1: []}
    send = be.fabric.send

    def spy(port, segments, done):
        data = be.memory.gather(segments)
        if int(data[:8].view("<u8")[0]) & 0xFFFF in ATTENTION_MAGICS:
            sent[port].append(data.tobytes())
        send(port, segments, done)

    be.fabric.send = spy
    return sent
