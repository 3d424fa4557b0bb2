"""Decoding on a backend: the Decoder (prefill, step, sampling, speculation)."""
