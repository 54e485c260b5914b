"""The model itself: config.json, checkpoint loading, the decoder and its elementwise ops,
RoPE, dtypes, the tokenizer, chat templates and the deterministic tiny test model."""
