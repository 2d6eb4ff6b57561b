"""The engine's Triton kernels (CUDA only): split-KV decode attention, fused RoPE, chunked sampling."""
