"""From a step file to this rank's micro-batches.

A step file (`{output_dir}/trainer/inbox/step-000042.json`, written by the Rust side) holds

    {"step": 42, "samples": [{"input_ids": [...], "loss_mask": [...], "logprobs": [...],
                              "advantage": 0.5, "group_id": 3}, ...]}

`loss_mask` is 1 on the tokens the policy generated (the only ones trained; a 1 on token 0 is
ignored: nothing predicts it), `logprobs` the sampling logprob of each token (0 where the mask is
0; may be absent for SFT), `advantage` one number per sample (1 for SFT), `group_id` is kept for
the record. Samples have any length. Optional keys (SFT): `checkpoint` (false: no checkpoint after
this step), `eval_samples` with `eval_before` / `eval_after` (the token-mean loss of those samples
before / after this step's update, reported as `eval_loss_before` / `eval_loss`).

`plan_step` gives every sample its per-token loss weight from the counts of the whole step (see
loss.py), deals the samples to ranks balanced by tokens, packs each rank's share into micro-batches,
and pads every rank to the same number of micro-batches with zero-weight ones so collective ops line
up. Two packings (PACKINGS; Rust's `ta_trainer::Packing` owns the names):

- `rows`: micro-batches of at most `micro_batch_tokens` padded tokens (rows * longest row);
- `prefix-tree`: micro-batches of at most `micro_batch_tokens` distinct tokens, in lexicographic
  order so that samples sharing a prefix land together; each carries `tree`, the radix tree of its
  rows (`radix_tree`), which the trainer runs one node at a time over its parent's KV cache. The
  (rows, longest row) tensors are the same in both: they say which tokens are trained.

    >>> mbs = plan_step(samples, rank=0, world_size=1, micro_batch_tokens=4096,
    ...                 aggregation="token-mean", packing="rows")
    >>> mbs[0]["input_ids"].shape   # (rows, longest row)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from train_agent.trainer.loss import token_weights


@dataclass
class Sample:
    input_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float]
    advantage: float
    weight: float = 0.0  # per trained token, from the whole step's counts

    @property
    def n_trained(self) -> int:
        return sum(1 for m in self.loss_mask[1:] if m)


def parse_samples(items: list[dict], where: str) -> list[Sample]:
    """Checks and converts sample objects; errors name `where` and the sample."""
    samples = []
    for i, s in enumerate(items):
        ids, mask = s["input_ids"], s["loss_mask"]
        logprobs = s.get("logprobs") or [0.0] * len(ids)
        if not (len(ids) == len(mask) == len(logprobs)) or len(ids) < 2:
            raise ValueError(
                f"{where}: sample {i}: input_ids ({len(ids)}), loss_mask ({len(mask)}) and logprobs "
                f"({len(logprobs)}) must have the same length, at least 2"
            )
        samples.append(
            Sample(ids, [1 if m else 0 for m in mask], [float(x) for x in logprobs], float(s.get("advantage", 1.0)))
        )
    return samples


def read_step(path: Path) -> tuple[int, list[Sample]]:
    """Parses and checks a step file; errors name the file and the sample."""
    step, samples, _ = read_step_file(path)
    return step, samples


def read_step_file(path: Path) -> tuple[int, list[Sample], dict]:
    """A step file's number, samples, and options: `checkpoint` (default true), `eval_samples`
        (parsed), `eval_before`, `eval_after` (SFT's held-out loss, before and after the update), and
        `rollout`: the step's rollout metrics (the file's optional `rollout` object: reward, completion
        rate, ... as the Rust side measured them), numbers only, for the loggers; `policy_lag`: how many
    updates the policy that drew the samples is behind the trainer's (0: on-policy, the default)."""
    data = json.loads(Path(path).read_text())
    samples = parse_samples(data["samples"], str(path))
    if not samples:
        raise ValueError(f"{path}: a step needs at least one sample")
    rollout = {
        k: float(v)
        for k, v in (data.get("rollout") or {}).items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    options = dict(
        checkpoint=bool(data.get("checkpoint", True)),
        eval_samples=parse_samples(data.get("eval_samples") or [], f"{path} (eval_samples)"),
        eval_before=bool(data.get("eval_before")),
        eval_after=bool(data.get("eval_after")),
        rollout=rollout,
        policy_lag=int(data.get("policy_lag", 0)),
    )
    return int(data["step"]), samples, options


def read_validation_file(path: Path) -> tuple[int, dict[str, float]]:
    """A validation file's step and metrics (`inbox/validation-000042.json`, written by the Rust
    side, `ta_trainer::ValidationFile`): {"step": 42, "metrics": {"val_success": 0.5, ...}}, the
    numbers Rust measured on the validation split at that step. Both keys are required."""
    data = json.loads(Path(path).read_text())
    if set(data) != {"step", "metrics"}:
        raise ValueError(f"{path}: a validation file has exactly the keys step and metrics, got {sorted(data)}")
    return int(data["step"]), {k: float(v) for k, v in data["metrics"].items()}


def shard(samples: list[Sample], world_size: int) -> list[list[Sample]]:
    """Longest first, each to the rank with the fewest tokens so far (deterministic)."""
    shards: list[list[Sample]] = [[] for _ in range(world_size)]
    load = [0] * world_size
    for s in sorted(samples, key=lambda s: -len(s.input_ids)):
        r = load.index(min(load))
        shards[r].append(s)
        load[r] += len(s.input_ids)
    return shards


def pack(samples: list[Sample], micro_batch_tokens: int) -> list[list[Sample]]:
    """Groups samples (longest first) so that rows * longest row <= micro_batch_tokens; a sample
    longer than the budget gets a micro-batch of its own."""
    groups: list[list[Sample]] = []
    for s in sorted(samples, key=lambda s: -len(s.input_ids)):
        if groups and (len(groups[-1]) + 1) * len(groups[-1][0].input_ids) <= micro_batch_tokens:
            groups[-1].append(s)
        else:
            groups.append([s])
    return groups


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def pack_tree(samples: list[Sample], micro_batch_tokens: int) -> list[list[Sample]]:
    """Groups samples in lexicographic order so that each group's distinct tokens (the size of its
    radix tree) stay within micro_batch_tokens; a sample longer than the budget gets a micro-batch
    of its own. In sorted order a sample's longest shared prefix with the group is the one with
    the sample before it, so the tree grows by its length minus that prefix."""
    groups: list[list[Sample]] = []
    size = 0
    for s in sorted(samples, key=lambda s: s.input_ids):
        grow = len(s.input_ids) - (_common_prefix(groups[-1][-1].input_ids, s.input_ids) if groups else 0)
        if groups and size + grow <= micro_batch_tokens:
            groups[-1].append(s)
            size += grow
        else:
            groups.append([s])
            size = len(s.input_ids)
    return groups


@dataclass
class Tree:
    """The radix tree of a micro-batch's rows: node i is the token run `nodes[i]`, continuing its
    parent `parents[i]` (-1: the root); nodes come parents first. Row r is the concatenation of the
    nodes on `paths[r]`, so its hidden states are those of its nodes, in path order."""

    nodes: list[torch.Tensor]
    parents: list[int]
    paths: list[list[int]]


def radix_tree(rows: list[list[int]]) -> Tree:
    """Every distinct prefix of `rows` once: a node ends where the rows passing through it diverge
    (or one of them ends). Identical rows share their whole path."""
    nodes: list[torch.Tensor] = []
    parents: list[int] = []
    paths: list[list[int]] = [[] for _ in rows]
    todo = [(list(range(len(rows))), 0, -1)]  # (rows sharing [0, start), start, their node)
    while todo:
        members, start, parent = todo.pop()
        first = rows[members[0]]
        end = start + min(_common_prefix(first[start:], rows[r][start:]) for r in members)
        node = parent
        if end > start:
            nodes.append(torch.tensor(first[start:end], dtype=torch.long))
            parents.append(parent)
            node = len(nodes) - 1
            for r in members:
                paths[r].append(node)
        branches: dict[int, list[int]] = {}
        for r in members:
            if len(rows[r]) > end:
                branches.setdefault(rows[r][end], []).append(r)
        todo.extend((b, end, node) for b in branches.values())
    return Tree(nodes, parents, paths)


def collate(samples: list[Sample]) -> dict[str, torch.Tensor]:
    """Right-padded (B, T) tensors; per-sample numbers are broadcast over tokens. No attention mask:
    under causal attention a right pad is never seen by a real token."""
    B, T = len(samples), max(len(s.input_ids) for s in samples)
    out = dict(
        input_ids=torch.zeros(B, T, dtype=torch.long),
        loss_mask=torch.zeros(B, T, dtype=torch.bool),
        old_logprobs=torch.zeros(B, T),
        advantages=torch.zeros(B, T),
        weights=torch.zeros(B, T),
    )
    for i, s in enumerate(samples):
        n = len(s.input_ids)
        out["input_ids"][i, :n] = torch.tensor(s.input_ids)
        out["loss_mask"][i, :n] = torch.tensor(s.loss_mask, dtype=torch.bool)
        out["old_logprobs"][i, :n] = torch.tensor(s.logprobs)
        out["advantages"][i, :n] = s.advantage
        out["weights"][i, :n] = s.weight
    out["loss_mask"][:, 0] = False  # token 0 has no context to be predicted from
    return out


def collate_tree(samples: list[Sample]) -> dict:
    """`collate` plus the rows' radix tree under `tree`."""
    return dict(collate(samples), tree=radix_tree([s.input_ids for s in samples]))


# The dispatch on the trainer config's `packing`: how a rank's samples are grouped and what a
# micro-batch holds. Its names are Rust's (ta_trainer::Packing), checked by tests/test_contract.py.
PACKINGS = {"rows": (pack, collate), "prefix-tree": (pack_tree, collate_tree)}


def empty_micro_batch() -> dict[str, torch.Tensor]:
    """Zero weight, one trained token: touches every parameter, changes nothing."""
    return collate([Sample([0, 0], [0, 1], [0.0, 0.0], 0.0, 0.0)])


def plan_step(
    samples: list[Sample],
    rank: int,
    world_size: int,
    micro_batch_tokens: int,
    aggregation: str,
    max_len_norm: float | None = None,
    packing: str = "rows",
) -> list[dict]:
    """This rank's micro-batches for one step (the same count on every rank)."""
    weights = token_weights([s.n_trained for s in samples], aggregation, max_len_norm)
    for s, w in zip(samples, weights):
        s.weight = w
    group, build = PACKINGS[packing]
    per_rank = [group(share, micro_batch_tokens) for share in shard(samples, world_size)]
    n = max(len(groups) for groups in per_rank)
    mine = [build(g) for g in per_rank[rank]]
    return mine + [empty_micro_batch() for _ in range(n - len(mine))]
