"""GPU side of train-agent: the OpenAI-compatible engine and the Lightning/PEFT trainer.

The Rust CLI owns every decision (what to sample, how to reward, what to train on); this package
owns tensors: it serves a model and updates a LoRA adapter on the token-level batches it is given.
"""
