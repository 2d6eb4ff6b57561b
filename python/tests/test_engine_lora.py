"""LoRA hot-loading: adapters made and saved by PEFT, served next to the base model, checked
against PEFT's own forward pass."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from test_engine_api import assert_error, call, reference_logprobs

from train_agent.engine.cli import BackgroundServer
from train_agent.engine.server import Engine
from train_agent.models import ModelSource, load_model, load_tokenizer

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def make_adapter(base_dir, out_dir, seed: int, r: int = 8, targets=TARGETS):
    """A PEFT adapter with random (non-zero) A and B, so it changes the model's outputs."""
    from peft import LoraConfig, get_peft_model

    model = load_model(ModelSource.parse(str(base_dir)), "cpu", torch.float32)
    torch.manual_seed(seed)
    peft = get_peft_model(model, LoraConfig(r=r, lora_alpha=2 * r, target_modules=targets, init_lora_weights=False))
    with torch.no_grad():
        for name, p in peft.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    peft.save_pretrained(out_dir)
    return out_dir


def peft_reference(base_dir, adapter_dir):
    from peft import PeftModel

    model = load_model(ModelSource.parse(str(base_dir)), "cpu", torch.float32)
    return PeftModel.from_pretrained(model, str(adapter_dir)).eval()


@pytest.fixture(scope="module")
def served(tiny_model_dir, tmp_path_factory):
    src = ModelSource.parse(str(tiny_model_dir))
    model = load_model(src, "cpu", torch.float32)
    engine = Engine(
        model,
        load_tokenizer(src),
        served_model_name="tiny",
        max_model_len=256,
        max_num_seqs=8,
        enable_lora=True,
        max_loras=2,
        max_lora_rank=8,
    )
    tmp = tmp_path_factory.mktemp("adapters")
    adapters = {
        "a": make_adapter(tiny_model_dir, tmp / "a", 1),
        "b": make_adapter(tiny_model_dir, tmp / "b", 2),
        "attn": make_adapter(tiny_model_dir, tmp / "attn", 3, r=4, targets=["q_proj", "v_proj"]),
        "big": make_adapter(tiny_model_dir, tmp / "big", 4, r=16),
    }
    with BackgroundServer(engine) as url:
        yield url, tiny_model_dir, adapters
    engine.generator.close()


def chat(url, model, content="Tell me a story", **kw):
    return call(
        url,
        "/v1/chat/completions",
        {
            "model": model,
            "messages": [{"role": "user", "content": content}],
            "return_token_ids": True,
            "logprobs": True,
            **kw,
        },
    )


def logprobs(r) -> list[float]:
    return [e["logprob"] for e in r["choices"][0]["logprobs"]["content"]]


def test_load_serve_replace_unload(served):
    url, base_dir, adapters = served
    base = chat(url, "tiny", max_tokens=8, temperature=0)[1]

    status, text = call(url, "/v1/load_lora_adapter", {"lora_name": "ad", "lora_path": str(adapters["a"])})
    assert status == 200 and text == "Success: LoRA adapter 'ad' added successfully."
    cards = {c["id"]: c for c in call(url, "/v1/models")[1]["data"]}
    assert cards["ad"]["parent"] == "tiny" and cards["ad"]["root"] == str(adapters["a"])

    tuned = chat(url, "ad", max_tokens=8, seed=3)[1]
    assert tuned["model"] == "ad"
    ids = tuned["choices"][0]["token_ids"]
    ref = reference_logprobs(peft_reference(base_dir, adapters["a"]), tuned["prompt_token_ids"], ids)
    assert max(abs(a - ref[j, t].item()) for j, (t, a) in enumerate(zip(ids, logprobs(tuned)))) < 1e-4
    base_ids = base["choices"][0]["token_ids"]
    base_ref = reference_logprobs(
        load_model(ModelSource.parse(str(base_dir)), "cpu", torch.float32), tuned["prompt_token_ids"], ids
    )
    assert max(abs(a - base_ref[j, t].item()) for j, (t, a) in enumerate(zip(ids, logprobs(tuned)))) > 1e-2

    # base and adapter requests in flight together each match their solo output
    solo_tuned = chat(url, "ad", max_tokens=8, temperature=0)[1]["choices"][0]["token_ids"]
    with ThreadPoolExecutor(4) as pool:
        mixed = list(
            pool.map(
                lambda m: chat(url, m, max_tokens=8, temperature=0)[1]["choices"][0]["token_ids"],
                ["tiny", "ad", "tiny", "ad"],
            )
        )
    assert mixed == [base_ids, solo_tuned, base_ids, solo_tuned]
    assert solo_tuned != base_ids

    # loading the same name again replaces the weights
    assert call(url, "/v1/load_lora_adapter", {"lora_name": "ad", "lora_path": str(adapters["b"])})[0] == 200
    again = chat(url, "ad", max_tokens=8, temperature=0)[1]
    ref_b = reference_logprobs(
        peft_reference(base_dir, adapters["b"]), again["prompt_token_ids"], again["choices"][0]["token_ids"]
    )
    assert again["choices"][0]["token_ids"] == ref_b.argmax(-1).tolist()
    assert len(call(url, "/v1/models")[1]["data"]) == 2

    status, text = call(url, "/v1/unload_lora_adapter", {"lora_name": "ad"})
    assert status == 200 and "removed" in text
    assert_error(*chat(url, "ad", max_tokens=2), 404, "`ad` does not exist")
    assert_error(*call(url, "/v1/unload_lora_adapter", {"lora_name": "ad"}), 404, "ad")
    assert chat(url, "tiny", max_tokens=8, temperature=0)[1]["choices"][0]["token_ids"] == base_ids


def test_partial_targets_and_limits(served):
    url, base_dir, adapters = served
    assert call(url, "/v1/load_lora_adapter", {"lora_name": "attn", "lora_path": str(adapters["attn"])})[0] == 200
    r = chat(url, "attn", max_tokens=6, seed=9)[1]
    ids = r["choices"][0]["token_ids"]
    ref = reference_logprobs(peft_reference(base_dir, adapters["attn"]), r["prompt_token_ids"], ids)
    assert max(abs(a - ref[j, t].item()) for j, (t, a) in enumerate(zip(ids, logprobs(r)))) < 1e-4

    assert call(url, "/v1/load_lora_adapter", {"lora_name": "second", "lora_path": str(adapters["a"])})[0] == 200
    assert_error(
        *call(url, "/v1/load_lora_adapter", {"lora_name": "third", "lora_path": str(adapters["b"])}),
        400,
        "--max-loras 2",
    )
    assert_error(
        *call(url, "/v1/load_lora_adapter", {"lora_name": "x", "lora_path": str(adapters["big"])}),
        400,
        "rank 16",
        "--max-lora-rank 8",
    )
    assert_error(
        *call(url, "/v1/load_lora_adapter", {"lora_name": "x", "lora_path": "/does/not/exist"}), 400, "/does/not/exist"
    )
    assert_error(*call(url, "/v1/load_lora_adapter", {"lora_name": "x"}), 400, "lora_path")
    for name in ("attn", "second"):
        assert call(url, "/v1/unload_lora_adapter", {"lora_name": name})[0] == 200
