"""The model off the engines: checkpoint, GGUF and tokenizer readers, quantisers and the KV cache, conversion (Model), the model image, teacher forcing and KV calibration."""
