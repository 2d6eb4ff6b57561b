"""The trained model: the base model with its LoRA adapter (`build_model`), and the logprobs of the
trained tokens under it (`trained_logprobs`, over padded rows or a prefix tree)."""

from __future__ import annotations

import contextlib
import copy
import os
import sys
import warnings
from pathlib import Path

import torch

from train_agent.models import ModelSource, load_model
from train_agent.trainer.batches import Tree
from train_agent.trainer.config import Config, on_gpu, resolved_precision
from train_agent.trainer.loss import (
    linear_token_logprobs,
    softcap_logits,
    token_logprobs,
)


def build_model(cfg: Config, dtype: torch.dtype):
    """The base model with a trainable LoRA adapter: resumed, started from `init_adapter`, or new."""
    from peft import LoraConfig, PeftModel, get_peft_model

    base = load_model(ModelSource.parse(cfg.model), "cpu", dtype)
    base.config.use_cache = False
    if on_gpu(cfg):
        if os.environ.get("TRAIN_AGENT_LIGER", "1") != "0":
            use_liger_kernels(base)
        # SDPA's flash kernels rather than cuDNN's, which PyTorch 2.11 picked on an H200: a GRPO
        # step's micro-batches have a new padded length every step, which cuDNN pays for each time
        # (the train phase side by side: benches/RESULTS.md, "Multi-turn GRPO step beside TRL")
        torch.backends.cuda.enable_cudnn_sdp(False)
    if cfg.gradient_checkpointing:
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    start = Path(cfg.resume_from) / "adapter" if cfg.resume_from else cfg.lora.init_adapter
    if start:
        model = PeftModel.from_pretrained(base, str(start), is_trainable=True)
    else:
        lc = cfg.lora
        model = get_peft_model(
            base,
            LoraConfig(
                r=lc.r,
                lora_alpha=lc.alpha,
                lora_dropout=lc.dropout,
                target_modules=lc.target_modules,
                use_rslora=lc.use_rslora,
                task_type="CAUSAL_LM",
            ),
        )
    if cfg.loss.beta > 0 and cfg.lora.init_adapter:
        # The KL term's reference is the policy the run started from. Started from an adapter (an
        # SFT warm start), that is the adapter, not the base model: with the adapter off, the KL
        # would pull an SFT policy back towards a base model that answers almost nothing.
        model.load_adapter(str(cfg.lora.init_adapter), adapter_name=REFERENCE, is_trainable=False)
        model.set_adapter("default")
    if resolved_precision(cfg) == "bf16-mixed":
        keep_lora_inputs_bf16(model)
    return model


REFERENCE = "reference"


@contextlib.contextmanager
def reference_policy(model):
    """The KL term's reference policy for the forwards inside: the start adapter, frozen as
    `reference`, when the run has one; else the base model (the adapter off). The reference plays
    in eval mode, so LoRA dropout does not make it noisy."""
    if REFERENCE not in model.peft_config:
        with model.disable_adapter():
            yield
        return
    training = model.training
    model.set_adapter(REFERENCE)
    model.eval()
    try:
        yield
    finally:
        # set_adapter also sets which adapter's weights require grad: the trained one's again
        model.set_adapter("default")
        model.train(training)


def use_liger_kernels(model) -> None:
    """Liger's Triton kernels for the decoder's RMSNorms and SwiGLU MLPs, where Liger knows
    the architecture (Llama, Mistral, Qwen2/3, Gemma, Phi-3 among others; elsewhere nothing
    changes). Each replaces several elementwise kernels with one and keeps fewer tensors for the
    backward pass (the SwiGLU recomputes its activation, the RMSNorm keeps its bf16 input and not a
    float32 copy). On an H200 the GRPO step bench's trainer peaked at 11.1 GiB with them against
    13.5 without, at 8,192-token micro-batches, and its step was no slower (benches/RESULTS.md).
    Liger's fused cross-entropy is not used: the head is `loss.linear_token_logprobs`. Needs CUDA
    (Triton); TRAIN_AGENT_LIGER=0 turns it off."""
    try:
        from liger_kernel.transformers import _apply_liger_kernel_to_instance
    except ImportError as e:  # not installed (the pinned environment has it on Linux)
        warnings.warn(f"Liger kernels unavailable ({e}); training with transformers' own layers", stacklevel=2)
        return
    # Liger also swaps the architecture's classes in its transformers module, for models built
    # later in this process; they are put back so that only this instance changes (its layers are
    # patched in place). RoPE stays transformers': Liger's replaces the module's function for every
    # model of the architecture.
    module = sys.modules[type(model).__module__]
    before = dict(vars(module))
    # the per-architecture dispatch TRL's trainers use too; it leaves unknown architectures alone
    _apply_liger_kernel_to_instance(model, rope=False, swiglu=True, rms_norm=True, fused_linear_cross_entropy=False)
    for name, value in before.items():
        if vars(module)[name] is not value:
            setattr(module, name, value)


def keep_lora_inputs_bf16(model) -> None:
    """Under bf16 autocast, stops PEFT from casting each adapted layer's bf16 input to the adapter's
    float32 before its LoRA matmuls. Autocast casts it straight back to bf16 for those matmuls (an
    exact round trip, so values and gradients are unchanged), and that second bf16 copy is what the
    backward pass keeps: one more input-sized tensor per adapted layer, where without the cast the
    LoRA matmul keeps the very tensor its base layer keeps. On the GRPO step bench (Qwen2.5-0.5B,
    LoRA on every linear layer, 8,192-token micro-batches) the trainer's peak fell by 1.3 GiB
    (benches/RESULTS.md); test_trainer.py checks values and memory."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    for module in model.modules():
        if isinstance(module, BaseTunerLayer):
            module.cast_input_dtype_enabled = False


def _fork(cache):
    """A KV cache that continues `cache` and leaves it as it is: a layer's update rebinds its
    tensors (`torch.cat`) rather than writing into them, so shallow copies of the layers suffice."""
    fork = copy.copy(cache)
    fork.layers = [copy.copy(layer) for layer in cache.layers]
    return fork


def tree_hidden(decoder, tree: Tree) -> torch.Tensor:
    """The decoder's last hidden states of the tree's rows, right-padded `[rows, longest, hidden]`:
    each node runs once, continuing its parent's KV cache (a parent's cache is dropped once its
    last child has run), and a row's states are its nodes' in path order. A shared prefix is thus
    computed once, and its gradient is the sum over the branches that attend to it: the same
    values and gradients as one padded row per sample."""
    children = [0] * len(tree.nodes)
    for p in tree.parents:
        if p >= 0:
            children[p] += 1
    caches, hidden = {}, []
    for i, (ids, parent) in enumerate(zip(tree.nodes, tree.parents)):
        past = _fork(caches[parent]) if parent >= 0 else None
        out = decoder(input_ids=ids[None], past_key_values=past, use_cache=True)
        hidden.append(out.last_hidden_state[0])
        if children[i]:
            caches[i] = out.past_key_values
        if parent >= 0:
            children[parent] -= 1
            if not children[parent]:
                del caches[parent]
    rows = [torch.cat([hidden[n] for n in path]) for path in tree.paths]
    return torch.nn.utils.rnn.pad_sequence(rows, batch_first=True)


def micro_batch_to(mb: dict, device: torch.device) -> dict:
    """The micro-batch's tensors, the tree's nodes included, on `device`."""
    out = {k: v.to(device) for k, v in mb.items() if k != "tree"}
    if "tree" in mb:
        t = mb["tree"]
        out["tree"] = Tree([n.to(device) for n in t.nodes], t.parents, t.paths)
    return out


def trained_logprobs(model, mb: dict[str, torch.Tensor], temperature: float = 1.0):
    """Logprobs and entropies of the trained tokens (flat, row-major over the loss mask) under
    softmax(cap(logits) / temperature): the decoder runs in the run's precision, the output head only
    on trained positions and in float32 (the engine's head does the same, engine.decoder.Decoder.logits),
    soft-capped where the model caps its logits (Gemma 2's `final_logit_softcapping`; the decoder's
    attention soft-cap is kept by loading such models with eager attention, models.load_model)."""
    lm = model.get_base_model()
    if "tree" in mb:  # packing "prefix-tree"
        hidden = tree_hidden(lm.get_decoder(), mb["tree"])
    else:
        # No attention mask: rows are right-padded, so under causal attention no real token sees a
        # pad, and without a mask SDPA takes its fused kernels (on a 2-core CPU, 542 against 389
        # tok/s for a LoRA step of SmolLM2-135M, benches/cpu_bf16_bench.py; on CUDA the flash
        # path). Pads' outputs are never read.
        hidden = lm.get_decoder()(input_ids=mb["input_ids"]).last_hidden_state
    sel = mb["loss_mask"][:, 1:]
    h = hidden[:, :-1][sel]  # the position before each trained token predicts it
    head = lm.get_output_embeddings()
    targets = mb["input_ids"][:, 1:][sel]
    softcap = getattr(lm.config, "final_logit_softcapping", None)
    if isinstance(head, torch.nn.Linear):
        # chunked: the [tokens, vocab] float32 logits never exist whole (loss.linear_token_logprobs)
        return linear_token_logprobs(h, head.weight, head.bias, targets, temperature, softcap=softcap)
    with torch.autocast(h.device.type, enabled=False):  # an adapted head (lm_head in target_modules)
        logits = softcap_logits(head(h).float(), softcap)
        if temperature != 1.0:
            logits = logits / temperature
    return token_logprobs(logits, targets)
