"""The engine process: an OpenAI-compatible server (`python -m train_agent.engine`, server.py) over
a continuous-batching scheduler (scheduler.py) and a decoder, the fast one (decoder.py, one row of
architectures.py per model type) or transformers' own forward (generic.py). Triton kernels live in
kernels/."""
