"""Prefix-tree packing (batches.radix_tree, trainer.tree_hidden): a micro-batch whose samples share
prefixes runs each distinct prefix once, and the logprobs and gradients are those of one padded row
per sample, on every architecture the trainer takes, sliding windows and soft-caps included.

The samples are shaped like a GRPO group: one system prompt, two tasks, rollouts that diverge at
different depths (one after the first trained turn: a trained token inside a shared node), a
duplicate, and a row that is a prefix of another."""

from __future__ import annotations

import random

import pytest
import torch
from rust_config import rust_config
from test_engine_archs import ARCHS, LORA_TARGETS, save_models, tokens
from test_engine_lora import make_adapter

from train_agent.trainer.batches import Sample, collate, collate_tree, pack_tree, plan_step, radix_tree
from train_agent.trainer.config import Config
from train_agent.trainer.model import build_model, trained_logprobs

ARCHS_SEED = {arch: i + 1 for i, arch in enumerate(ARCHS)}


def rows_of(tree, i: int) -> list[int]:
    return torch.cat([tree.nodes[n] for n in tree.paths[i]]).tolist()


def test_the_radix_tree_holds_every_row_and_each_prefix_once():
    rows = [[1, 2, 3, 4, 5], [1, 2, 3, 9], [1, 2, 3, 4, 5], [1, 2], [7, 8], [1, 2, 3, 4, 5, 6]]
    tree = radix_tree(rows)
    assert [rows_of(tree, i) for i in range(len(rows))] == rows
    assert all(p < i for i, p in enumerate(tree.parents)), "parents come before their children"
    assert sorted(t for n in tree.nodes for t in n.tolist()) == sorted([1, 2, 3, 4, 5, 9, 6, 7, 8])
    assert tree.paths[0] == tree.paths[2], "identical rows share their path"
    assert [len(tree.nodes[n]) for n in tree.paths[3]] == [2], "a row that ends inside a run splits it"


def test_pack_tree_counts_distinct_tokens():
    prompt = list(range(100, 140))
    samples = [Sample(prompt + [i] * 10, [0] * 40 + [1] * 10, [0.0] * 50, 1.0) for i in range(6)]
    groups = pack_tree(list(reversed(samples)), micro_batch_tokens=40 + 3 * 10)
    assert [len(g) for g in groups] == [3, 3]  # 70 distinct tokens each, where rows would pad to 150
    assert [s.input_ids[-1] for g in groups for s in g] == list(range(6)), "lexicographic order"
    assert [len(g) for g in pack_tree(samples, 10)] == [1] * 6  # each over the budget: alone


def test_plan_step_builds_the_tree_only_when_asked():
    samples = [Sample([1, 2, 3, i], [0, 0, 1, 1], [0.0] * 4, 1.0) for i in range(3)]
    [tree_mb] = plan_step(samples, 0, 1, 100, "token-mean", packing="prefix-tree")
    [rows_mb] = plan_step(samples, 0, 1, 100, "token-mean", packing="rows")
    assert "tree" not in rows_mb and sum(len(n) for n in tree_mb["tree"].nodes) == 6
    assert torch.equal(tree_mb["loss_mask"], rows_mb["loss_mask"])


def test_rows_by_default_and_no_tree_with_checkpointing(tmp_path):
    def cfg(**kw):
        return Config.from_dict(rust_config(model="m", output_dir=str(tmp_path), **kw))

    assert cfg().packing == "rows"
    assert cfg(packing="prefix-tree").packing == "prefix-tree"
    with pytest.raises(ValueError, match="prefix-tree' cannot run with gradient_checkpointing"):
        cfg(gradient_checkpointing=True, packing="prefix-tree")
    with pytest.raises(ValueError, match="packing = 'trie' is not one of"):
        cfg(packing="trie")


def group_samples(seed: int) -> list[Sample]:
    rng = random.Random(seed)
    system = tokens(seed, 24)
    out = []
    for task in range(2):
        prompt = system + tokens(seed * 10 + task, 6)
        first_turn = tokens(seed * 100 + task, 5)  # two rollouts sample the same first turn
        for r in range(3):
            turn = first_turn if r < 2 else tokens(seed * 1000 + r, 5)
            tail = tokens(seed * 77 + task * 5 + r, rng.randint(3, 9))
            ids = prompt + turn + tokens(seed + 500 + task, 4) + tail
            mask = [0] * len(prompt) + [1] * 5 + [0] * 4 + [1] * len(tail)
            out.append(Sample(ids, mask, [-0.3] * len(ids), rng.uniform(-1, 1), 1.0))
    out.append(Sample(list(out[0].input_ids), list(out[0].loss_mask), list(out[0].logprobs), 0.5, 1.0))  # a duplicate
    cut = len(out[1].input_ids) - 3
    out.append(Sample(out[1].input_ids[:cut], out[1].loss_mask[:cut], out[1].logprobs[:cut], -0.7, 1.0))  # a prefix
    return out


@pytest.fixture(scope="module")
def arch_dirs(tmp_path_factory, smollm2_gguf) -> dict:
    # longrope switches tables with the sequence length, which a cached continuation cannot know
    # (see test_engine_archs); the generic engine path serves it, the trainer takes rows for it
    return save_models(tmp_path_factory.mktemp("archs"), [a for a in ARCHS if a != "phi3-longrope"])


@pytest.mark.parametrize("arch", [a for a in ARCHS if a != "phi3-longrope"])
def test_tree_logprobs_and_gradients_equal_rows(arch_dirs, tmp_path, arch):
    path = arch_dirs[arch]
    adapter = make_adapter(path, tmp_path / "adapter", seed=3, r=4, targets=LORA_TARGETS[arch])
    cfg = Config.from_dict(
        rust_config(model=str(path), output_dir=str(tmp_path), accelerator="cpu", lora={"init_adapter": str(adapter)})
    )
    model = build_model(cfg, torch.float32)
    samples = group_samples(ARCHS_SEED[arch])
    tree_mb, rows_mb = collate_tree(samples), collate(samples)
    assert sum(len(n) for n in tree_mb["tree"].nodes) < 0.6 * sum(len(s.input_ids) for s in samples)

    def run(mb):
        model.zero_grad()
        logp, entropy = trained_logprobs(model, mb)
        (logp * torch.linspace(-1, 1, len(logp))).sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
        return logp.detach(), entropy.detach(), grads

    logp_t, ent_t, grad_t = run(tree_mb)
    logp_r, ent_r, grad_r = run(rows_mb)
    assert torch.allclose(logp_t, logp_r, atol=1e-5), (logp_t - logp_r).abs().max()
    assert torch.allclose(ent_t, ent_r, atol=1e-5)
    worst = max(((grad_t[n] - grad_r[n]).abs().max() / grad_r[n].abs().max().clamp(min=1e-12)).item() for n in grad_r)
    assert worst < 1e-4, f"largest relative gradient difference {worst}"
