"""Every design the generator knows; importing this package registers them."""
from . import attention, int8, mv, overlay, probe, q4, ternary  # noqa: F401

#: the PYNQ-Z1 configuration of every design: its defaults, but for the attention engine, which
#: takes the form the PL top carries (overlay.attention_params: INT16 K and V, 24 MACs on
#: 16-byte beats, exp table 21 bits, Z 16 fraction bits). `make sim`, `make timing`,
#: `make report` and `make formal` all read this.
PYNQ_Z1 = {
    "probe": {},
    "int8-engine": {},
    "ternary-engine": {},
    "mv-engine": {},
    "q4-engine": {},
    "attention-engine": overlay.attention_params(),
    "overlay": {},
}
