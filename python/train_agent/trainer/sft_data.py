"""SFT data: conversations in, token ids and a loss mask out, rendered exactly as the engine renders
prompts (chat_format.render_prompt: the model's chat template with tools, or the Hermes fallback).

    python -m train_agent.trainer.sft_data tokenize --model SPEC --dataset PATH --out tokens.jsonl
                                            [--summary summary.json] [--max-len 4096] [--train-on all|last]
    python -m train_agent.trainer.sft_data parquet IN.jsonl OUT.parquet

The loss mask comes from the template, prefix by prefix. For assistant message i (unless its `weight`
is 0: OpenAI fine-tuning's way to show a turn without training on it):

    before = render_prompt(messages[:i], add_generation_prompt=True)    what the engine sends the model
    upto   = render_prompt(messages[:i+1], add_generation_prompt=False)  the same plus the reply

the reply is upto[len(before):] without trailing white space: the text, the tool-call blocks and the
end-of-turn token the model must write to stop (the newline after it belongs to the next prompt).
Both renders must be prefixes of the whole conversation's render, else the template rewrites earlier
turns (Qwen3 drops old reasoning) and the conversation cannot be one sample; the error says to
unroll the dataset and train on the last turn only. Every segment is tokenised on its own, as the
engine tokenises a prompt (`add_special_tokens=False`), so the prompt tokens of each turn are the
engine's and the mask needs no offset arithmetic.

A dataset is JSONL or Parquet of rows {messages, tools, id?, scenario_id?} (OpenAI chat format;
`train-agent curate` writes them), or a directory holding train.jsonl / train.parquet.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from train_agent.chat_format import normalize_messages, render_prompt


class TemplateError(ValueError):
    pass


def assistant_spans(tokenizer, messages: list[dict], tools: list[dict] | None, train_on: str = "all"):
    """The conversation's text and the character spans of the assistant replies that get loss: every
    one but those of `weight` 0 (OpenAI fine-tuning's per-message weight: shown, not trained)."""
    msgs = normalize_messages(messages)
    targets = [i for i, m in enumerate(msgs) if m["role"] == "assistant" and messages[i].get("weight", 1) != 0]
    if train_on == "last":
        targets = targets[-1:]
    if not targets:
        return None, []
    end = targets[-1] + 1
    full = render_prompt(tokenizer, msgs[:end], tools, add_generation_prompt=False)
    spans = []
    for i in targets:
        if i == 0:
            raise TemplateError("a conversation starts with an assistant message; it needs a user turn first")
        before = render_prompt(tokenizer, msgs[:i], tools)
        upto = render_prompt(tokenizer, msgs[: i + 1], tools, add_generation_prompt=False)
        if not (upto.startswith(before) and full.startswith(upto)):
            raise TemplateError(
                f"the chat template does not render assistant turn {i} as a continuation of its prompt (it "
                "rewrites earlier turns)\nhint: export the dataset unrolled (`train-agent curate --unroll`) and "
                "train with --train-on last"
            )
        stop = len(upto.rstrip())
        if stop > len(before):
            spans.append((len(before), stop))
    return full, spans


def tokenize_conversation(
    tokenizer, messages: list[dict], tools: list[dict] | None, train_on: str = "all"
) -> tuple[list[int], list[int]]:
    """Token ids and loss mask (1 on the tokens of the assistant replies that get loss)."""
    text, spans = assistant_spans(tokenizer, messages, tools, train_on)
    if text is None:
        return [], []
    ids: list[int] = []
    mask: list[int] = []
    pos = 0
    for start, stop in spans + [(len(text), len(text))]:
        for seg, trained in ((text[pos:start], 0), (text[start:stop], 1)):
            if seg:
                seg_ids = tokenizer(seg, add_special_tokens=False)["input_ids"]
                ids += seg_ids
                mask += [trained] * len(seg_ids)
        pos = stop
    return ids, mask


# ---- datasets ---------------------------------------------------------------------------------


def _from_parquet_row(row: dict) -> dict:
    """Parquet keeps tool parameter schemas as JSON text (a schema is not one Arrow type)."""
    tools = []
    for t in row.get("tools") or []:
        fn = dict(t["function"])
        if isinstance(fn.get("parameters"), str):
            fn["parameters"] = json.loads(fn["parameters"])
        tools.append({"type": t.get("type") or "function", "function": {k: v for k, v in fn.items() if v is not None}})
    return {**row, "tools": tools}


def read_dataset(path: str | Path) -> list[dict]:
    p = Path(path)
    if p.is_dir():
        for name in ("train.jsonl", "train.parquet"):
            if (p / name).exists():
                p = p / name
                break
        else:
            raise FileNotFoundError(
                f"{path} holds no train.jsonl or train.parquet\nhint: pass the --out "
                "directory of `train-agent curate`, or a JSONL/Parquet file"
            )
    if p.suffix == ".parquet":
        import pyarrow.parquet as pq

        return [_from_parquet_row(r) for r in pq.read_table(p).to_pylist()]
    rows = []
    with open(p) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{p}:{n}: not JSON: {e}") from None
    return rows


def tokenize_dataset(tokenizer, rows: list[dict], max_len: int, train_on: str = "all"):
    """Yields {id, scenario_id, input_ids, loss_mask} for every usable row; returns the counts via
    the summary dict it fills."""
    summary = dict(rows=len(rows), kept=0, too_long=0, no_assistant_turn=0, tokens=0, trained_tokens=0, longest=0)
    out = []
    for n, row in enumerate(rows):
        if not isinstance(row.get("messages"), list):
            raise ValueError(f'row {n}: no \'messages\' list\nhint: rows are {{"messages": [...], "tools": [...]}}')
        ids, mask = tokenize_conversation(tokenizer, row["messages"], row.get("tools") or None, train_on)
        if sum(mask) == 0:
            summary["no_assistant_turn"] += 1
            continue
        if len(ids) > max_len:
            summary["too_long"] += 1
            continue
        summary["kept"] += 1
        summary["tokens"] += len(ids)
        summary["trained_tokens"] += sum(mask)
        summary["longest"] = max(summary["longest"], len(ids))
        out.append(
            dict(id=str(row.get("id", n)), scenario_id=str(row.get("scenario_id") or ""), input_ids=ids, loss_mask=mask)
        )
    return out, summary


# ---- Parquet ----------------------------------------------------------------------------------


def parquet_schema():
    import pyarrow as pa

    call = pa.struct(
        [
            ("id", pa.string()),
            ("type", pa.string()),
            ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())])),
        ]
    )
    message = pa.struct(
        [
            ("role", pa.string()),
            ("content", pa.string()),
            ("reasoning_content", pa.string()),
            ("tool_calls", pa.list_(call)),
            ("tool_call_id", pa.string()),
            ("name", pa.string()),
            ("weight", pa.int8()),
        ]
    )
    tool = pa.struct(
        [
            ("type", pa.string()),
            ("function", pa.struct([("name", pa.string()), ("description", pa.string()), ("parameters", pa.string())])),
        ]
    )
    return pa.schema(
        [
            ("messages", pa.list_(message)),
            ("tools", pa.list_(tool)),
            ("id", pa.string()),
            ("scenario_id", pa.string()),
            ("source", pa.string()),
        ]
    )


def write_parquet(src: str | Path, dst: str | Path) -> int:
    """JSONL rows -> Parquet with an explicit schema (messages typed; tool parameters as JSON text)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = read_dataset(src)
    for r in rows:
        for t in r.get("tools") or []:
            params = t["function"].get("parameters")
            if params is not None and not isinstance(params, str):
                t["function"]["parameters"] = json.dumps(params, ensure_ascii=False)
    table = pa.Table.from_pylist(rows, schema=parquet_schema())
    tmp = Path(str(dst) + ".tmp")
    pq.write_table(table, tmp)
    tmp.replace(dst)
    return len(rows)


# ---- CLI --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m train_agent.trainer.sft_data")
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tokenize")
    t.add_argument("--model", required=True)
    t.add_argument("--dataset", required=True)
    t.add_argument("--out", required=True)
    t.add_argument("--summary")
    t.add_argument("--max-len", type=int, default=4096)
    t.add_argument("--train-on", choices=["all", "last"], default="all")
    q = sub.add_parser("parquet")
    q.add_argument("src")
    q.add_argument("dst")
    a = p.parse_args(argv)
    if a.cmd == "parquet":
        print(f"{write_parquet(a.src, a.dst)} rows -> {a.dst}")
        return 0
    from train_agent.models import ModelSource, load_tokenizer

    tokenizer = load_tokenizer(ModelSource.parse(a.model))
    rows, summary = tokenize_dataset(tokenizer, read_dataset(a.dataset), a.max_len, a.train_on)
    out = Path(a.out)
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    tmp.replace(out)
    if a.summary:  # written last: its presence marks the tokens as complete
        Path(a.summary).write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
