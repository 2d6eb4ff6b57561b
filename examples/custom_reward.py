#!/usr/bin/env python3
"""A custom reward for train-agent, in plain Python (no dependencies).

train-agent runs this once per group of rollouts, with the group as JSON on stdin:
    {"name": ..., "task": ..., "scenario": {...} or null, "trajectories": [...]}
(trajectories in the run's JSONL format: messages, final_answer, outcome, tool_calls, ...)
and reads one score per trajectory, in order, from stdout:
    {"scores": [0.0, 1.0, ...]}
A non-zero exit fails the step with this script's stderr in the error message.

This one rewards grounded answers: every number in the final answer must appear in some tool
result the agent saw (1.0), else the share of numbers that do. Answers without numbers score 0.5.
For a state-changing server, check the state instead: did the file get written, did the row change.

Use it in the run config (train.toml):
    [[reward.custom]]
    name = "grounded"
    command = "python3 examples/custom_reward.py"
    weight = 0.5
    timeout_s = 30
"""
import json
import re
import sys

NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def numbers(text: str) -> set[float]:
    return {float(m.replace(",", "")) for m in NUMBER.findall(text or "")}


def grounded(trajectory: dict) -> float:
    claimed = numbers(trajectory.get("final_answer") or "")
    if not claimed:
        return 0.5
    seen: set[float] = set()
    for message in trajectory["messages"]:
        if message["role"] == "tool":
            seen |= numbers(message.get("content") or "")
    return len(claimed & seen) / len(claimed)


def main() -> None:
    group = json.load(sys.stdin)
    json.dump({"scores": [grounded(t) for t in group["trajectories"]]}, sys.stdout)


if __name__ == "__main__":
    main()
