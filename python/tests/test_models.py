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


def test_gguf_source_is_split_into_dir_and_file(smollm2_gguf):
    src = ModelSource.parse(str(smollm2_gguf))
    assert src.gguf_file == smollm2_gguf.name
    assert src.kwargs() == {"gguf_file": smollm2_gguf.name}


def test_bf16_is_fast_with_amx_or_on_amd_cores_with_avx512_bf16():
    from train_agent.models import fast_bf16

    assert fast_bf16("GenuineIntel", {"amx_bf16": True, "avx512_bf16": True})
    assert not fast_bf16("GenuineIntel", {"amx_bf16": False, "avx512_bf16": True}), "measured slower on a Xeon"
    assert fast_bf16("AuthenticAMD", {"amx_bf16": False, "avx512_bf16": True})
    assert not fast_bf16("AuthenticAMD", {"avx512_bf16": False})
    assert not fast_bf16("", {})
