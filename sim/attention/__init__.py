"""cocotb tests of the attention engine (attention-engine)."""
