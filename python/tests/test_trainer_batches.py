"""Step files to micro-batches: sharding, packing, collation, and that neither changes the loss."""

import json
import random

import pytest

from train_agent.trainer.batches import Sample, collate, pack, plan_step, read_step, read_step_file, shard
from train_agent.trainer.loss import grpo_loss


def sample(n, trained, adv=1.0):
    return Sample(list(range(1, n + 1)), [0] * (n - trained) + [1] * trained, [-0.5] * n, adv)


def test_read_step_checks_lengths(tmp_path):
    p = tmp_path / "step-000001.json"
    p.write_text(json.dumps({"step": 1, "samples": [{"input_ids": [1, 2, 3], "loss_mask": [0, 1], "advantage": 1}]}))
    with pytest.raises(ValueError, match=r"step-000001.json: sample 0: input_ids \(3\), loss_mask \(2\)"):
        read_step(p)
    p.write_text(json.dumps({"step": 7, "samples": [{"input_ids": [1, 2, 3], "loss_mask": [1, 1, 1]}]}))
    step, [s] = read_step(p)  # SFT: no logprobs, no advantage
    assert step == 7 and s.logprobs == [0.0] * 3 and s.advantage == 1.0 and s.n_trained == 2


def test_step_file_rollout_metrics_keep_numbers_only(tmp_path):
    p = tmp_path / "step-000003.json"
    sample = {"input_ids": [1, 2, 3], "loss_mask": [0, 1, 1]}
    rollout = {"reward": 0.25, "groups": 4, "ground_truth": None, "time": {"rollout_s": 2.0}, "done": True}
    p.write_text(json.dumps({"step": 3, "samples": [sample], "rollout": rollout}))
    step, samples, options = read_step_file(p)
    assert step == 3 and len(samples) == 1
    assert options["rollout"] == {"reward": 0.25, "groups": 4.0}
    p.write_text(json.dumps({"step": 3, "samples": [sample]}))
    assert read_step_file(p)[2]["rollout"] == {}
    # a step file without policy_lag (synchronous GRPO, SFT) is on-policy
    assert read_step_file(p)[2]["policy_lag"] == 0
    p.write_text(json.dumps({"step": 3, "samples": [sample], "policy_lag": 1}))
    assert read_step_file(p)[2]["policy_lag"] == 1


def test_shard_balances_tokens_and_pack_respects_the_budget():
    samples = [sample(n, 2) for n in (10, 9, 8, 3, 2, 2)]
    shards = shard(samples, 2)
    assert [sum(len(s.input_ids) for s in sh) for sh in shards] == [17, 17]
    groups = pack(samples, micro_batch_tokens=20)
    assert [[len(s.input_ids) for s in g] for g in groups] == [[10, 9], [8, 3], [2, 2]]
    assert all(len(g) * len(g[0].input_ids) <= 20 for g in groups)
    assert [len(g) for g in pack([sample(30, 2)], 20)] == [1]  # too long: alone


def test_collate_pads_right_and_never_trains_token_0():
    mb = collate(
        [Sample([5, 6, 7], [1, 1, 1], [0.0, -1.0, -2.0], 0.5, 0.25), Sample([8, 9], [0, 1], [0.0, -3.0], -1.0, 0.5)]
    )
    assert mb["input_ids"].tolist() == [[5, 6, 7], [8, 9, 0]]
    assert mb["loss_mask"].tolist() == [[False, True, True], [False, True, False]]
    assert mb["advantages"][mb["loss_mask"]].tolist() == [0.5, 0.5, -1.0]
    assert mb["weights"][mb["loss_mask"]].tolist() == [0.25, 0.25, 0.5]
    assert mb["old_logprobs"][mb["loss_mask"]].tolist() == [-1.0, -2.0, -3.0]


@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean-token-sum-norm", "seq-mean-token-mean"])
def test_splitting_a_step_never_changes_its_loss(aggregation):
    rng = random.Random(0)
    samples = []
    for _ in range(7):
        n = rng.randint(4, 30)
        samples.append(
            Sample(
                [rng.randrange(100) for _ in range(n)],
                [0] * 3 + [1] * (n - 3),
                [-rng.random() for _ in range(n)],
                rng.uniform(-1, 1),
            )
        )

    def fake_new_logprobs(ids):  # any fixed function of the tokens stands in for the model
        return -(ids.float() % 7) / 5

    def total(world_size, budget):
        loss, counted = 0.0, 0
        for rank in range(world_size):
            mbs = plan_step(samples, rank, world_size, budget, aggregation, max_len_norm=32)
            for mb in mbs:
                m = mb["loss_mask"]
                part, _ = grpo_loss(
                    fake_new_logprobs(mb["input_ids"][m]),
                    mb["old_logprobs"][m],
                    mb["advantages"][m],
                    mb["weights"][m],
                    0.2,
                    0.28,
                )
                loss += part.item()
            counted += len(mbs)
        return loss, counted

    whole, _ = total(1, 10_000)
    for world_size, budget in [(1, 40), (2, 64), (3, 30), (8, 100)]:
        loss, n_mbs = total(world_size, budget)
        assert loss == pytest.approx(whole, rel=1e-6)
        assert n_mbs % world_size == 0  # every rank runs the same number of micro-batches
