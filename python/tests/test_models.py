import os
import shutil
from pathlib import Path

from train_agent.models import ModelSource, load_model, load_tokenizer


def test_tiny_model_loads_with_a_chat_template(tiny_model_dir):
    src = ModelSource.parse(str(tiny_model_dir))
    tok = load_tokenizer(src)
    model = load_model(src, "cpu", __import__("torch").float32)
    ids = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True)
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):
        ids = ids["input_ids"]
    assert tok.decode(ids).rstrip().endswith("<|im_start|>assistant")
    assert model.config.num_hidden_layers == 2


def test_a_gguf_file_is_converted_once_to_the_same_weights_and_tokenizer(smollm2_gguf, tmp_path, monkeypatch):
    """What a GGUF file loads as, read through its conversion, is what transformers reads from the
    file itself: the same tensors in float32 and bf16, the same token ids and chat template. The
    conversion is made once per file and redone, in place of the old one, when the file changes;
    the file parsed once for it leaves `gguf` as it was."""
    import gguf as gguf_lib
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setenv("TRAIN_AGENT_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "m.gguf"
    gguf.symlink_to(smollm2_gguf)
    entry_points = (gguf_lib.GGUFReader, gguf_lib.get_tensor_name_map)
    src = ModelSource.parse(str(gguf))
    assert (gguf_lib.GGUFReader, gguf_lib.get_tensor_name_map) == entry_points, "the conversion's memos undone"
    assert Path(src.path).is_relative_to(tmp_path / "cache" / "models" / "converted")
    first = (Path(src.path) / "model.safetensors").stat().st_mtime_ns
    assert ModelSource.parse(str(gguf)) == src
    assert (Path(src.path) / "model.safetensors").stat().st_mtime_ns == first, "read again, not converted again"
    for dtype in (torch.float32, torch.bfloat16):
        want = AutoModelForCausalLM.from_pretrained(str(tmp_path), gguf_file=gguf.name, dtype=dtype).state_dict()
        got = load_model(src, "cpu", dtype).state_dict()
        assert got.keys() == want.keys()
        for k in want:
            assert got[k].dtype == want[k].dtype == dtype and torch.equal(got[k], want[k]), k
    want_tok, got_tok = AutoTokenizer.from_pretrained(str(tmp_path), gguf_file=gguf.name), load_tokenizer(src)
    text = "SELECT count(*) FROM café WHERE name LIKE '%déjà vu%';\n\n  \t— 12,5 €"
    assert got_tok(text)["input_ids"] == want_tok(text)["input_ids"]
    messages = [{"role": "system", "content": "You are x."}, {"role": "user", "content": text}]
    assert got_tok.apply_chat_template(messages, tokenize=False) == want_tok.apply_chat_template(
        messages, tokenize=False
    )
    assert got_tok.eos_token_id == want_tok.eos_token_id

    gguf.unlink()
    gguf.symlink_to(tmp_path / "copy.gguf")
    shutil.copyfile(smollm2_gguf, tmp_path / "copy.gguf")
    copy = ModelSource.parse(str(gguf)).path
    assert copy != src.path, "another file under the same name is converted anew"
    os.utime(tmp_path / "copy.gguf", ns=(0, 10**18))
    assert ModelSource.parse(str(gguf)).path not in (copy, src.path), "a changed file is converted anew"
    assert not Path(copy).exists(), "the changed file's old conversion is removed"
    assert Path(src.path).exists(), "another file's conversion is kept"
    assert not list((tmp_path / "cache" / "models" / "converted").glob("*.partial-*")), (
        "no half-written conversion left"
    )


def test_bf16_is_fast_with_amx_or_on_amd_cores_with_avx512_bf16():
    from train_agent.models import fast_bf16

    assert fast_bf16("GenuineIntel", {"amx_bf16": True, "avx512_bf16": True})
    assert not fast_bf16("GenuineIntel", {"amx_bf16": False, "avx512_bf16": True}), "measured slower on a Xeon"
    assert fast_bf16("AuthenticAMD", {"amx_bf16": False, "avx512_bf16": True})
    assert not fast_bf16("AuthenticAMD", {"avx512_bf16": False})
    assert not fast_bf16("", {})
