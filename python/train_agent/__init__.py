"""GPU side of train-agent: the OpenAI-compatible engine (`train_agent.engine`, run as
`python -m train_agent.engine`) and the Lightning/PEFT trainer (`train_agent.trainer`, run as
`python -m train_agent.trainer`); what both use sits here (models.py, chat_format.py).

The Rust CLI owns every decision (what to sample, how to reward, what to train on); this package
owns tensors: it serves a model and updates a LoRA adapter on the token-level batches it is given.
"""
