"""Serving a loaded model: the LLM API, scheduler, sequences, paged KV pool and block manager,
model runner, CUDA graphs, sampling, n-gram speculation and sessions."""
