"""The multi-turn GRPO step of `train-agent train` beside TRL's GRPOTrainer with an
`environment_factory`, on the same tasks, model and settings (issue 18, item 5).

    python benches/trl_multiturn.py --model /tmp/qwen.gguf --train-agent /tmp/ta/train-agent \
        --warm-start 64 --out trl_multiturn.json

Both sides, one after the other on one GPU:
- the model: a `.gguf` is dequantized once into a Hugging Face directory (bf16 safetensors,
  tokenizer, chat template) and both sides load that directory; a directory is used as it is.
  `--tiny` swaps the weights for a 2-layer random Qwen2 with the same tokenizer: it checks the
  plumbing in minutes and measures nothing.
- the tasks: `train-agent scenarios synth --server "train-agent demo-server" --n 300 --seed 1`,
  train split (or `--scenarios FILE`), served by the real demo MCP server over stdio on both sides.
- the start: the base model, or (`--warm-start N`) one LoRA adapter that `train-agent collect
  --reference` + `curate` + `sft` make from N reference traces, loaded by both sides. The base
  model rarely writes its template's `<tool_call>` format, and TRL ends an episode at the first
  turn without a parsable call, so from the base model TRL's episodes are mostly one turn long:
  warm-start for a multi-turn comparison.
- the step: G scenarios x R rollouts (8 x 8), up to `--turns` model turns (6) of up to
  `--max-tokens` (256) sampled tokens each, LoRA r16 (alpha 32) on every linear layer (or the
  warm-start adapter's), bf16 compute over bf16 base weights, AdamW at `--lr` (2e-5, constant),
  GRPO clipping 0.2 / 0.28, token-mean loss, group-scaled advantages, no KL, one update per batch.

train-agent: the real `train-agent train` (engine, MCP client, rewards, trainer; dynamic sampling
off so a step is exactly G x R episodes, no validation, all R x G episodes in flight); its
per-step times come from the run's metrics.jsonl (`time`: rollout_s, reward_s, train_s,
reload_s, step_s).

TRL (1.16): `GRPOTrainer(environment_factory=...)`, its documented multi-turn tool API. Each
rollout gets an environment whose methods are the tools as `train-agent tools --json` shows them
to the model (names, descriptions, parameters; TRL lists them alphabetically and writes a
parameter's `type` before its `description`, so the first prompt differs in order only, and
both sides report its length in tokens), built from that list; a call goes to
the same demo server over MCP stdio (a minimal JSON-RPC client below, one server for all rollouts,
as train-agent uses for read-only servers); `complete_task` records the answer, and
`get_reward` scores it against the scenario's `expected` with train-agent's ground-truth rules
(ported below; an episode without `complete_task` scores 0; train-agent adds its rule-based
credit on top, which TRL's side leaves out: the step's cost does not depend on the reward's
value). The system prompt is train-agent's default
(`crates/rollout/src/system_prompt.j2`, rendered with the server's instructions). Generation is
transformers' `generate` (vLLM is not installed: `use_vllm=False`); `max_tool_calling_iterations
= turns - 1` and `generation_kwargs={"max_new_tokens": max_tokens}` bound the turns and the tokens
per turn; `max_completion_length` (the whole episode's budget in TRL) is `turns x (max_tokens +
1200)`, room for the tool results. One optimizer step per G x R episodes: per-device batch
`--trl-micro-batch` (8) x gradient accumulation (G x R / 8), `steps_per_generation` = that, so
one generation round feeds one step and no extra forward pass computes old logprobs. Gradient
checkpointing is off on both sides (train-agent's default; TRL's is on:
`--trl-gradient-checkpointing`). TRL steps
take the scenarios train-agent's steps drew, in the same order (its trajectory files), so both
sides play the same tasks step by step.

Where the loops differ by design (reported, not hidden): train-agent ends an episode when the
model calls `complete_task` and answers a turn without a tool call with a nudge (a user message)
until the turn limit; TRL ends an episode at the first turn without a parsed tool call and
continues after `complete_task` (its result is one more tool message). train-agent parses the
template's `<tool_call>` format and, failing that, calls written as JSON text; TRL parses the
template's format only. train-agent leaves groups whose rewards are all equal out of the
trainer's batch (they have no advantage); TRL runs them through forward and backward. The JSON
reports turns, tool calls, sampled tokens and trained samples per step for both, so step times
can be read per unit of work.

Output: per step and median (over the steps after the first, which pays start-up: CUDA graphs,
the trainer's start, kernel compilation) step time with its breakdown, sampled tokens, turns,
tool calls, reward; peak GPU memory (nvidia-smi, whole device, above the phase's starting level;
plus TRL's torch peak and train-agent's trainer peak); as JSON (`--out`) and a markdown table.
`--trl-time-budget` stops TRL after the step that crosses it (at least 2 steps), so the run fits
a lease; the JSON says how many steps ran.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SYSTEM_PROMPT = ROOT / "crates" / "rollout" / "src" / "system_prompt.j2"
COMPLETE_TASK = "complete_task"


# ---------------------------------------------------------------------------------- MCP (stdio)


class McpStdio:
    """A minimal MCP client over stdio (newline-delimited JSON-RPC 2.0): initialize, tools/list,
    tools/call. Calls are serialized: TRL runs an environment's tools one after another."""

    def __init__(self, argv: list[str], stderr_path: Path):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=stderr_path.open("w"), text=True, bufsize=1)
        self.lock = threading.Lock()
        self.next_id = 0
        init = self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                           "clientInfo": {"name": "trl-multiturn-bench", "version": "0"}})
        self.instructions = (init.get("instructions") or "").strip()
        self.server_name = (init.get("serverInfo") or {}).get("name") or "the MCP server"
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _send(self, msg: dict) -> None:
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict) -> dict:
        with self.lock:
            self.next_id += 1
            rid = self.next_id
            self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
            while True:
                line = self.proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"MCP server exited during {method}")
                msg = json.loads(line)
                if msg.get("id") == rid and ("result" in msg or "error" in msg):
                    if "error" in msg:
                        raise RuntimeError(f"MCP {method}: {msg['error']}")
                    return msg["result"]

    def call_tool(self, name: str, arguments: dict) -> tuple[str, bool]:
        r = self.request("tools/call", {"name": name, "arguments": arguments})
        text = "\n".join(c.get("text", "") for c in r.get("content", []) if c.get("type") == "text")
        return text, bool(r.get("isError"))

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# ------------------------------------------------------------------- ground truth (as train-agent)
# crates/reward/src/ground_truth.rs: a plain string is a phrase (case-insensitive, word boundaries),
# a plain number a number in the answer (relative tolerance 1e-6), and the rules exact / contains /
# regex / number+tolerance / set (share of values mentioned). Unfinished rollouts get half.

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _numbers(text: str) -> list[float]:
    out = []
    for m in _NUMBER.finditer(text):
        try:
            out.append(float(m.group().replace(",", "")))
        except ValueError:
            pass
    return out


def _mentions_number(answer: str, x: float, tol: float) -> bool:
    return any(abs(n - x) <= tol for n in _numbers(answer))


def _mentions_phrase(answer: str, phrase: str) -> bool:
    phrase = phrase.strip()
    return not phrase or re.search(rf"(?i)(^|\W){re.escape(phrase)}($|\W)", answer) is not None


def ground_truth(expected, answer: str, completed: bool) -> float:
    def match() -> float:
        if isinstance(expected, bool):
            return float(_mentions_phrase(answer, json.dumps(expected)))
        if isinstance(expected, (int, float)):
            return float(_mentions_number(answer, expected, abs(expected) * 1e-6 + 1e-9))
        if isinstance(expected, str):
            return float(_mentions_phrase(answer, expected))
        if "exact" in expected:
            return float(answer.strip().lower() == str(expected["exact"]).strip().lower())
        if "contains" in expected:
            return float(str(expected["contains"]).lower() in answer.lower())
        if "regex" in expected:
            try:
                return float(re.search(expected["regex"], answer) is not None)
            except re.error:
                return 0.0
        if "number" in expected:
            return float(_mentions_number(answer, expected["number"], max(expected.get("tolerance", 0), 1e-9)))
        if "set" in expected:
            values = expected["set"]
            if not values:
                return 1.0
            hit = sum(_mentions_number(answer, v, abs(v) * 1e-6 + 1e-9) if isinstance(v, (int, float)) and not isinstance(v, bool)
                      else _mentions_phrase(answer, v if isinstance(v, str) else json.dumps(v)) for v in values)
            return hit / len(values)
        return 0.0

    s = match()
    return s if completed else 0.5 * s


# ------------------------------------------------------------------------- the TRL environment

_PY_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "array": "list", "object": "dict"}


def _one_line(text: str) -> str:
    return " ".join((text or "").split()).replace("\\", "\\\\").replace('"""', "'''")


def environment_class(specs: list[dict], client: McpStdio, max_chars: int):
    """A class whose public methods are the tools of `specs` (OpenAI format, as `train-agent tools
    --json` prints them): signature and Google-style docstring rebuilt from each schema, so
    transformers' get_json_schema gives the model the same names, descriptions and parameters. A
    call goes to the MCP server; `complete_task` ends the task and records its answer."""
    src = []
    for spec in specs:
        f = spec["function"]
        name, props = f["name"], f.get("parameters", {}).get("properties", {})
        required = set(f.get("parameters", {}).get("required", []))
        params, args_doc = [], []
        for p in sorted(props, key=lambda p: p not in required):  # required first: Python's order rule
            t = _PY_TYPES.get(props[p].get("type"), "str")
            params.append(f"{p}: {t}" if p in required else f"{p}: {t} | None = None")
            args_doc.append(f"            {p}: {_one_line(props[p].get('description', p))}")
        doc = f'"""{_one_line(f.get("description", name))}\n\n        Args:\n' + "\n".join(args_doc) + '\n        """' if args_doc \
            else f'"""{_one_line(f.get("description", name))}"""'
        call = "{" + ", ".join(f"{p!r}: {p}" for p in props) + "}"
        src.append(f"    def {name}(self{''.join(', ' + x for x in params)}):\n        {doc}\n"
                   f"        return self._tool({name!r}, {call})\n")
    body = "class DemoServerEnv(_Base):\n" + "\n".join(src)

    class _Base:
        def __init__(self):
            self.expected, self.answer, self.completed = None, None, False

        def reset(self, **row):
            self.expected = json.loads(row["expected"]) if row.get("expected") is not None else None
            self.answer, self.completed = None, False
            return None

        def _tool(self, name: str, arguments: dict) -> str:
            arguments = {k: v for k, v in arguments.items() if v is not None}
            if name == COMPLETE_TASK:
                self.answer, self.completed = str(arguments.get("summary", "")), True
                return "Task completed."
            text, is_error = client.call_tool(name, arguments)
            if len(text) > max_chars:  # as train-agent's rollout::agent::truncate
                text = f"{text[:max_chars]}\n[truncated: showing the first {max_chars} of {len(text)} characters]"
            return f"Error: {text}" if is_error else text

        def get_reward(self) -> float:
            # The environment sees tool calls, not the model's text: an episode that did not call
            # complete_task scores 0 (train-agent gives it half the match of its last text).
            if not self.completed:
                return 0.0
            return 1.0 if self.expected is None else ground_truth(self.expected, self.answer, True)

    scope = {"_Base": _Base}
    exec(body, scope)  # noqa: S102 - the source is built above from the server's tool schemas
    return scope["DemoServerEnv"]


# --------------------------------------------------------------------------------- GPU memory


class GpuMemory:
    """The GPU's used memory (nvidia-smi, MiB), sampled every 0.5 s; `peak_since(mark)` is the
    highest reading since `mark()`, above the reading at the mark."""

    def __init__(self, gpu: str = "0"):
        self.gpu, self.samples, self.stop = gpu, [], threading.Event()
        self.ok = shutil.which("nvidia-smi") is not None
        if self.ok:
            threading.Thread(target=self._run, daemon=True).start()

    def read(self) -> float | None:
        try:
            out = subprocess.run(["nvidia-smi", "-i", self.gpu, "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=10, check=True).stdout
            return float(out.strip().splitlines()[0])
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            return None

    def _run(self):
        while not self.stop.is_set():
            v = self.read()
            if v is not None:
                self.samples.append((time.time(), v))
            time.sleep(0.5)

    def mark(self) -> tuple[float, float | None]:
        return time.time(), self.read() if self.ok else None

    def peak_since(self, mark) -> dict | None:
        t0, base = mark
        vals = [v for t, v in self.samples if t >= t0]
        if not self.ok or not vals:
            return None
        return {"peak_gib": round(max(vals) / 1024, 2), "above_start_gib": round((max(vals) - (base or 0)) / 1024, 2)}


# ------------------------------------------------------------------------------ preparation


PROGRESS = re.compile(r"^step \d+ |TRL step |^trained |starting the engine|Traceback|Error")


def run(argv: list[str], log: Path) -> None:
    """Runs `argv` with its output in `log`, echoing the lines that show progress."""
    print("$ " + " ".join(argv), flush=True)
    with log.open("a") as f, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                              errors="replace") as p:
        for line in p.stdout:
            f.write(line)
            text = line.split("\r")[-1].split("Z  INFO ")[-1]  # past progress bars and log prefixes
            m = PROGRESS.search(text)
            if m:
                print("  " + text[m.start() if m.group().startswith("TRL") else 0:].rstrip()[:300], flush=True)
    if p.returncode != 0:
        raise SystemExit(f"failed ({p.returncode}): {' '.join(argv)}\n{log.read_text()[-4000:]}")


def prepare_model(spec: str, out: Path, tiny: bool) -> Path:
    """A Hugging Face directory both sides load: the GGUF dequantized to bf16 (once), or `spec`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not tiny and not spec.endswith(".gguf"):
        return Path(spec)
    if (out / "config.json").exists():
        return out
    p = Path(spec)
    kw = {"gguf_file": p.name} if spec.endswith(".gguf") else {}
    src = str(p.parent) if kw else spec
    tok = AutoTokenizer.from_pretrained(src, **kw)
    print(f"converting {spec} to {out} (bf16)" if not tiny else f"a random 2-layer Qwen2 with {spec}'s tokenizer", flush=True)
    if tiny:
        from transformers import Qwen2Config, Qwen2ForCausalLM

        torch.manual_seed(0)
        eos = tok.get_vocab().get("<|im_end|>", tok.eos_token_id)
        cfg = Qwen2Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32768,
                          tie_word_embeddings=True, eos_token_id=eos, bos_token_id=tok.bos_token_id,
                          pad_token_id=tok.pad_token_id)
        model = Qwen2ForCausalLM(cfg).to(torch.bfloat16)
    else:
        if kw:  # unpacked to dense weights, as train-agent's own GGUF loads are: a plain model saves
            from transformers.utils.quantization_config import GgufConfig

            kw["quantization_config"] = GgufConfig(dequantize=True)
        model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.bfloat16, **kw)
        if getattr(model, "hf_quantizer", None) is not None:
            model.hf_quantizer = None
            model.config.__dict__.pop("quantization_config", None)
    # Both chat stops, as the model's own generation_config.json on the Hub has them (the GGUF
    # carries one, its tokenizer the other): train-agent's engine and TRL stop at either.
    own = model.generation_config.eos_token_id
    own = own if isinstance(own, list) else [own]
    stops = [i for i in (tok.get_vocab().get("<|im_end|>"), tok.eos_token_id, *own) if isinstance(i, int)]
    model.generation_config.eos_token_id = list(dict.fromkeys(stops))
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    tmp.rename(out)
    return out


def ta_tools(bin_: str, server: str) -> list[dict]:
    out = subprocess.run([bin_, "tools", "--server", server, "--json"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def system_prompt(client: McpStdio) -> str:
    """train-agent's default system prompt for the server (ta_mcp::enrichment_text; the demo server
    lists no resources). The bench uses the one train-agent's trajectories hold when it ran."""
    import jinja2

    instructions = f"Instructions from {client.server_name}:\n{client.instructions}\n" if client.instructions else ""
    text = jinja2.Template(SYSTEM_PROMPT.read_text()).render(complete_task=COMPLETE_TASK, instructions=instructions.strip())
    return text.strip()  # as rollout::prompt::render_system_prompt


# ------------------------------------------------------------------------------ train-agent side


def run_train_agent(a, model: Path, scenarios: Path, init_adapter: Path | None, work: Path, mem: GpuMemory) -> dict:
    run_dir = work / "ta-run"
    shutil.rmtree(run_dir, ignore_errors=True)
    cfg = work / "grpo.toml"
    cfg.write_text(f"""# benches/trl_multiturn.py: the train-agent side
seed = 0
[rollout]
rollouts_per_scenario = {a.rollouts}
scenarios_per_step = {a.groups}
max_steps = {a.steps}
epochs = 1
max_turns = {a.turns}
max_tokens = {a.max_tokens}
temperature = 1.0
top_p = 1.0
concurrency = {a.groups * a.rollouts}
tool_result_max_chars = {a.tool_result_max_chars}
eval_every = 0
eval_rollouts = 0
validate_base = false
dynamic_sampling = false
[lora]
r = {a.lora_rank}
alpha = {2.0 * a.lora_rank}
target_modules = "all-linear"
[optim]
lr = {a.lr}
schedule = "constant"
[loss]
epsilon_low = 0.2
epsilon_high = 0.28
beta = 0.0
aggregation = "token-mean"
""")
    argv = [a.train_agent, "train", "--server", a.server, "--scenarios", str(scenarios), "--base-model", str(model),
            "--out", str(run_dir), "--config", str(cfg)]
    if init_adapter:
        argv += ["--init-adapter", str(init_adapter)]
    mark = mem.mark()
    t0 = time.time()
    run(argv, work / "train-agent.log")
    wall = time.time() - t0
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    steps, order, prompt_tokens, system = [], [], [], None
    for r in rows:
        if "time" not in r or "rollout_s" not in r["time"]:
            continue  # a validation row
        trajs = [json.loads(line) for line in (run_dir / "trajectories" / f"step-{r['step']:06d}.jsonl").read_text().splitlines() if line.strip()]
        ids = []
        for t in sorted(trajs, key=lambda t: (t["group"]["index"] if isinstance(t.get("group"), dict) else 0)):
            if t["scenario_id"] not in ids:
                ids.append(t["scenario_id"])
        order.append(ids)
        for t in trajs:
            if t.get("turns"):
                prompt_tokens.append(len(t["turns"][0].get("prompt_token_ids") or []))
            if system is None and t.get("messages"):
                system = t["messages"][0].get("content")
        tr = r.get("trainer") or {}
        steps.append({"step": r["step"], **{k: round(v, 3) for k, v in r["time"].items()},
                      "episodes": len(trajs), "sampled_tokens": r.get("completion_tokens"),
                      "trained_samples": r.get("samples"), "groups_kept": r.get("groups_kept"),
                      "trained_tokens": r.get("sample_tokens"), "mean_turns": r.get("mean_turns"),
                      "tool_calls": round((r.get("mean_tool_calls") or 0) * len(trajs)),
                      "completion_rate": r.get("completion_rate"), "ground_truth": r.get("ground_truth"),
                      "reward": r.get("reward"), "trainer_peak_gib": tr.get("peak_memory_gb"),
                      "trainer_forward_backward_s": tr.get("forward_backward_s"), "trainer_save_s": tr.get("save_s")})
    return {"steps": steps, "order": order, "wall_s": round(wall, 1), "system_prompt": system,
            "first_prompt_tokens": statistics.median(prompt_tokens) if prompt_tokens else None,
            "gpu_memory": mem.peak_since(mark), "run_dir": str(run_dir)}


def warm_start(a, model: Path, scenarios: Path, work: Path) -> Path:
    """One SFT adapter both sides start from: reference traces of the first N train scenarios."""
    final = work / "sft" / "final"
    if final.exists():
        return final
    log = work / "warm-start.log"
    traces, dataset = work / "traces", work / "dataset"
    for d in (traces, dataset, work / "sft"):
        shutil.rmtree(d, ignore_errors=True)
    run([a.train_agent, "collect", "--server", a.server, "--scenarios", str(scenarios), "--reference", "--split", "train",
         "--limit", str(a.warm_start), "--out", str(traces)], log)
    run([a.train_agent, "curate", str(traces), "--dedupe", "--no-parquet", "--out", str(dataset)], log)
    cfg = work / "sft.toml"
    cfg.write_text(f'[lora]\nr = {a.lora_rank}\nalpha = {2.0 * a.lora_rank}\ntarget_modules = "all-linear"\nuse_rslora = false\n')
    run([a.train_agent, "sft", "--dataset", str(dataset), "--base-model", str(model), "--out", str(work / "sft"),
         "--config", str(cfg), "--epochs", str(a.warm_start_epochs), "--lr", "2e-4", "--eval-fraction", "0"], log)
    return final


# --------------------------------------------------------------------------------------- TRL side


def trl_worker(spec_path: str) -> None:
    """The TRL run, in its own process (its own GPU memory; a crash keeps train-agent's result)."""
    spec = json.loads(Path(spec_path).read_text())
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    import transformers
    import trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    cuda = torch.cuda.is_available()
    client = McpStdio(spec["server_argv"], Path(spec["work"]) / "trl-mcp-stderr.log")
    env_cls = environment_class(spec["tools"], client, spec["tool_result_max_chars"])
    tok = AutoTokenizer.from_pretrained(spec["model"])
    tok.padding_side = "left"
    dtype = torch.bfloat16 if cuda else torch.float32
    n = spec["groups"] * spec["rollouts"]
    micro = min(spec["micro_batch"], n)
    args = GRPOConfig(
        output_dir=str(Path(spec["work"]) / "trl-out"), report_to="none", save_strategy="no", logging_steps=1,
        max_steps=spec["steps"], learning_rate=spec["lr"], lr_scheduler_type="constant", warmup_steps=0,
        weight_decay=0.0, max_grad_norm=1.0, bf16=cuda, use_cpu=not cuda,
        gradient_checkpointing=spec["gradient_checkpointing"],
        model_init_kwargs=None if spec["init_adapter"] else {"dtype": dtype},
        per_device_train_batch_size=micro, gradient_accumulation_steps=n // micro,
        num_generations=spec["rollouts"], shuffle_dataset=False,
        max_completion_length=spec["turns"] * (spec["max_tokens"] + 1200),
        generation_kwargs={"max_new_tokens": spec["max_tokens"]},
        max_tool_calling_iterations=spec["turns"] - 1, temperature=1.0, top_p=1.0,
        beta=0.0, epsilon=0.2, epsilon_high=0.28, loss_type="dapo", scale_rewards="group", num_iterations=1,
        seed=0, dataloader_num_workers=0, log_completions=False,
    )
    rows = [{"prompt": [{"role": "system", "content": spec["system_prompt"]}, {"role": "user", "content": s["task"]}],
             "expected": json.dumps(s.get("expected")), "scenario_id": s["id"]} for s in spec["scenarios"]]
    peft_config = None
    if spec["init_adapter"]:
        from peft import PeftModel

        base = AutoModelForCausalLM.from_pretrained(spec["model"], dtype=dtype)
        model = PeftModel.from_pretrained(base, spec["init_adapter"], is_trainable=True)
    else:
        from peft import LoraConfig

        model = spec["model"]
        peft_config = LoraConfig(r=spec["lora_rank"], lora_alpha=2 * spec["lora_rank"], lora_dropout=0.0,
                                 target_modules="all-linear", task_type="CAUSAL_LM")

    timing: dict[int, dict] = {}

    class Timed(GRPOTrainer):
        """GRPOTrainer, with the rollout (generation + tool calls) and its scoring timed."""

        def _generate(self, prompts):
            t0 = time.perf_counter()
            out = super()._generate(prompts)
            if cuda:
                torch.cuda.synchronize()
            prompt_ids, completion_ids, tool_mask, completions = out[:4]
            rec = timing.setdefault(self.state.global_step + 1, {})
            rec["rollout_s"] = time.perf_counter() - t0
            rec["episodes"] = rec["trained_samples"] = len(completion_ids)
            rec["sampled_tokens"] = sum(sum(m) for m in tool_mask) if tool_mask is not None else sum(map(len, completion_ids))
            rec["completion_tokens"] = sum(map(len, completion_ids))
            rec["prompt_tokens"] = statistics.median(map(len, prompt_ids))
            rec["mean_turns"] = statistics.mean(sum(m.get("role") == "assistant" for m in c) for c in completions)
            rec["tool_calls"] = sum(  # server calls, as train-agent counts them (complete_task apart)
                (tc.get("function") or {}).get("name") != COMPLETE_TASK for c in completions for m in c for tc in m.get("tool_calls") or [])
            return out

        def _generate_and_score_completions(self, inputs):
            t0 = time.perf_counter()
            out = super()._generate_and_score_completions(inputs)
            if cuda:
                torch.cuda.synchronize()
            rec = timing.setdefault(self.state.global_step + 1, {})
            rec["generate_and_score_s"] = time.perf_counter() - t0
            rec["scenario_ids"] = sorted({x["scenario_id"] for x in inputs})
            rec["reward"] = statistics.mean(e.get_reward() for e in self.environments) if self.environments else None
            return out

    class Clock(TrainerCallback):
        def __init__(self):
            self.t_begin = self.t_start = time.perf_counter()

        def on_train_begin(self, args, state, control, **kw):
            self.t_start = time.perf_counter()

        def on_step_begin(self, args, state, control, **kw):
            self.t_begin = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            if cuda:
                torch.cuda.synchronize()
            rec = timing.setdefault(state.global_step, {})
            rec["step_s"] = time.perf_counter() - self.t_begin
            rec["train_s"] = rec["step_s"] - rec.get("generate_and_score_s", 0.0)
            rec["score_s"] = rec.get("generate_and_score_s", 0.0) - rec.get("rollout_s", 0.0)
            rec["elapsed_s"] = time.perf_counter() - self.t_start
            print(f"TRL step {state.global_step}: {rec['step_s']:.1f} s (rollout {rec.get('rollout_s', 0):.1f} s)", flush=True)
            if state.global_step >= 2 and rec["elapsed_s"] > spec["time_budget_s"]:
                control.should_training_stop = True

    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t_load = time.perf_counter()
    trainer = Timed(model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tok,
                    peft_config=peft_config, environment_factory=env_cls, callbacks=[Clock()])
    load_s = time.perf_counter() - t_load
    t0 = time.perf_counter()
    trainer.train()
    train_wall = time.perf_counter() - t0
    client.close()
    steps = []
    for s in sorted(timing):
        r = timing[s]
        if "step_s" not in r:
            continue
        steps.append({"step": s, **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}})
    result = {"steps": steps, "load_s": round(load_s, 1), "train_wall_s": round(train_wall, 1),
              "versions": {"trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__},
              "generation": "transformers generate (use_vllm=False; vLLM not installed)",
              "template_prefix_preserving": trainer.chat_template is None,
              "eos_token_ids": list(trainer.eos_token_ids),
              "torch_peak_allocated_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
              "torch_peak_reserved_gib": round(torch.cuda.max_memory_reserved() / 2**30, 2) if cuda else None}
    Path(spec["result"]).write_text(json.dumps(result, indent=1))


def run_trl(a, model: Path, scenarios: list[dict], tools: list[dict], system: str, init_adapter: Path | None,
            work: Path, mem: GpuMemory) -> dict:
    spec = {"model": str(model), "scenarios": scenarios, "tools": tools, "system_prompt": system,
            "server_argv": a.server_argv, "work": str(work), "groups": a.groups, "rollouts": a.rollouts,
            "turns": a.turns, "max_tokens": a.max_tokens, "steps": a.trl_steps or a.steps, "lr": a.lr,
            "lora_rank": a.lora_rank, "micro_batch": a.trl_micro_batch, "gradient_checkpointing": a.trl_gradient_checkpointing,
            "tool_result_max_chars": a.tool_result_max_chars, "time_budget_s": a.trl_time_budget,
            "init_adapter": str(init_adapter) if init_adapter else None, "result": str(work / "trl-result.json")}
    (work / "trl-spec.json").write_text(json.dumps(spec))
    (work / "trl-result.json").unlink(missing_ok=True)
    mark = mem.mark()
    t0 = time.time()
    run([sys.executable, __file__, "--trl-worker", str(work / "trl-spec.json")], work / "trl.log")
    out = json.loads((work / "trl-result.json").read_text())
    out["wall_s"] = round(time.time() - t0, 1)
    out["gpu_memory"] = mem.peak_since(mark)
    return out


# ------------------------------------------------------------------------------------ reporting


def medians(steps: list[dict], keys: list[str]) -> dict:
    steady = steps[1:] or steps
    return {k: round(statistics.median(s[k] for s in steady), 3) for k in keys if steady and all(s.get(k) is not None for s in steady)}


def table(res: dict) -> str:
    ta, tr = res.get("train_agent"), res.get("trl")
    lines = ["| | train-agent | TRL 1.16 (no vLLM) |", "|---|---:|---:|"]

    def cell(side, key, fmt="{:.2f}"):
        v = (side or {}).get("median", {}).get(key)
        return fmt.format(v) if v is not None else "-"

    def mem(side):
        g = (side or {}).get("gpu_memory")
        return f"{g['peak_gib']:.1f} GiB" if g else "-"

    lines.append(f"| steps run (median over steps 2..) | {len((ta or {}).get('steps', []))} | {len((tr or {}).get('steps', []))} |")
    lines.append(f"| **step** | **{cell(ta, 'step_s')} s** | **{cell(tr, 'step_s')} s** |")
    lines.append(f"| rollout (generation + tool calls) | {cell(ta, 'rollout_s')} s | {cell(tr, 'rollout_s')} s |")
    lines.append(f"| reward / scoring | {cell(ta, 'reward_s')} s | {cell(tr, 'score_s')} s |")
    lines.append(f"| train (optimizer step) | {cell(ta, 'train_s')} s | {cell(tr, 'train_s')} s |")
    lines.append(f"| adapter reload | {cell(ta, 'reload_s')} s | - |")
    lines.append(f"| sampled tokens / step | {cell(ta, 'sampled_tokens', '{:.0f}')} | {cell(tr, 'sampled_tokens', '{:.0f}')} |")
    lines.append(f"| model turns / episode | {cell(ta, 'mean_turns')} | {cell(tr, 'mean_turns')} |")
    lines.append(f"| tool calls / step | {cell(ta, 'tool_calls', '{:.0f}')} | {cell(tr, 'tool_calls', '{:.0f}')} |")
    lines.append(f"| samples trained / step (flat groups: none in train-agent) | {cell(ta, 'trained_samples', '{:.0f}')} | {cell(tr, 'trained_samples', '{:.0f}')} |")
    lines.append(f"| ms per sampled token (step) | {cell(ta, 'ms_per_token')} | {cell(tr, 'ms_per_token')} |")
    lines.append(f"| GPU memory peak, whole device (nvidia-smi) | {mem(ta)} | {mem(tr)} |")
    gib = lambda v: f"{v:.1f} GiB" if v is not None else "-"  # noqa: E731
    lines.append(f"| trainer's torch peak allocation | {gib((ta or {}).get('trainer_peak_gib'))} | {gib((tr or {}).get('torch_peak_allocated_gib'))} |")
    if res.get("speedup") is not None:
        lines.append(f"\nstep-time ratio TRL / train-agent: **{res['speedup']:.2f}x** (goal: >= 5x)")
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--trl-worker":
        return trl_worker(sys.argv[2])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help=".gguf file (dequantized once to a HF dir) or HF directory")
    ap.add_argument("--tiny", action="store_true", help="a 2-layer random Qwen2 with --model's tokenizer (plumbing check)")
    ap.add_argument("--train-agent", default=os.environ.get("TRAIN_AGENT_BIN") or shutil.which("train-agent")
                    or str(ROOT / "target" / "release" / "train-agent"))
    ap.add_argument("--scenarios", help="scenarios file (default: scenarios synth --n 300 --seed 1); the train split is used")
    ap.add_argument("--warm-start", type=int, default=0, metavar="N", help="start both sides from an SFT adapter on N reference traces")
    ap.add_argument("--warm-start-epochs", type=int, default=3)
    ap.add_argument("--init-adapter", help="start both sides from this PEFT adapter")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--trl-steps", type=int, help="TRL steps (default: --steps)")
    ap.add_argument("--trl-time-budget", type=float, default=150.0, help="stop TRL after the step that crosses this many seconds (>= 2 steps)")
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--rollouts", type=int, default=8)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--max-tokens", type=int, default=256, help="sampled tokens per model turn")
    ap.add_argument("--tool-result-max-chars", type=int, default=4000)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--lora-rank", type=int, default=16)
    ap.add_argument("--trl-micro-batch", type=int, default=8, help="TRL per-device batch (completions per forward/backward)")
    ap.add_argument("--trl-gradient-checkpointing", action="store_true", help="TRL's default; off to match train-agent's")
    ap.add_argument("--prepare-only", action="store_true", help="stop after the model, the tasks and the warm start (all cached in --work)")
    ap.add_argument("--skip-train-agent", action="store_true", help="reuse the train-agent result of an earlier run in --work, if any")
    ap.add_argument("--skip-trl", action="store_true")
    ap.add_argument("--work", default="/tmp/trl-multiturn")
    ap.add_argument("--out", help="JSON results")
    a = ap.parse_args()
    if a.trl_steps is not None and a.trl_steps < 1:
        ap.error("--trl-steps must be at least 1")

    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    a.train_agent = str(Path(a.train_agent).resolve())
    a.server = f"{a.train_agent} demo-server"
    a.server_argv = [a.train_agent, "demo-server"]
    mem = GpuMemory()
    t_all = time.time()

    t0 = time.time()
    model = prepare_model(a.model, work / ("model-tiny" if a.tiny else "model"), a.tiny)
    prep_s = time.time() - t0
    print(f"model: {model} ({prep_s:.0f} s)", flush=True)

    if a.scenarios:
        source = Path(a.scenarios)
    else:
        synth = work / "synth"
        if not (synth / "scenarios.jsonl").exists():
            run([a.train_agent, "scenarios", "synth", "--server", a.server, "--n", "300", "--seed", "1", "--out", str(synth)], work / "synth.log")
        source = synth / "scenarios.jsonl"
    text = source.read_text().strip()
    rows = json.loads(text) if text.startswith("[") else [json.loads(line) for line in text.splitlines() if line.strip()]
    train = [r for r in rows if r.get("split", "train") == "train"]
    for i, r in enumerate(train):
        r.setdefault("id", f"s{i}")
    need = a.groups * max(a.steps, a.trl_steps or 0)
    if len(train) < need:
        raise SystemExit(f"{len(train)} train scenarios, {need} needed ({a.groups} per step)")
    scenarios = work / "train.jsonl"
    scenarios.write_text("".join(json.dumps({**r, "split": "train"}) + "\n" for r in train))

    init = Path(a.init_adapter) if a.init_adapter else None
    warm_s = None
    if a.warm_start and not init:
        t0 = time.time()
        init = warm_start(a, model, scenarios, work)
        warm_s = round(time.time() - t0, 1)
    if a.prepare_only:
        print(f"prepared in {time.time() - t_all:.0f} s: model {model}, scenarios {scenarios}, start {init or 'the base model'}")
        return

    client = McpStdio(a.server_argv, work / "mcp-stderr.log")
    system = system_prompt(client)
    client.close()
    tools = ta_tools(a.train_agent, a.server)

    res = {"model": a.model, "tiny": a.tiny, "model_dir": str(model), "init_adapter": str(init) if init else None,
           "settings": {k: getattr(a, k) for k in ("groups", "rollouts", "turns", "max_tokens", "lr", "lora_rank", "steps",
                                                  "trl_steps", "trl_time_budget", "trl_micro_batch", "trl_gradient_checkpointing",
                                                  "tool_result_max_chars", "warm_start", "warm_start_epochs")},
           "model_prep_s": round(prep_s, 1), "warm_start_s": warm_s,
           "gpu": subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
           if mem.ok else "none (CPU)"}
    by_id = {r["id"]: r for r in train}
    order = [r["id"] for r in train]
    ta_cache = work / "train-agent-result.json"
    if a.skip_train_agent and ta_cache.exists():
        print(f"train-agent: the result of an earlier run ({ta_cache})", flush=True)
    if not a.skip_train_agent or ta_cache.exists():
        if a.skip_train_agent:
            ta = json.loads(ta_cache.read_text())
        else:
            try:
                ta = run_train_agent(a, model, scenarios, init, work, mem)
            except SystemExit as e:  # TRL still runs; the JSON says what failed
                res["train_agent_error"] = str(e)[-4000:]
                print(res["train_agent_error"], flush=True)
                ta = None
            if ta:
                ta_cache.write_text(json.dumps(ta))
    else:
        ta = None
    if ta:
        for s in ta["steps"]:
            s["ms_per_token"] = round(1000 * s["step_s"] / s["sampled_tokens"], 3) if s.get("sampled_tokens") else None
        ta["median"] = medians(ta["steps"], ["step_s", "rollout_s", "reward_s", "train_s", "reload_s", "sampled_tokens",
                                             "mean_turns", "tool_calls", "trained_samples", "ms_per_token"])
        peaks = [s["trainer_peak_gib"] for s in ta["steps"] if s.get("trainer_peak_gib") is not None]
        ta["trainer_peak_gib"] = max(peaks) if peaks else None
        res["system_prompt_rendered_matches_train_agent"] = ta["system_prompt"] == system
        system = ta["system_prompt"] or system
        drawn = [i for step in ta.pop("order") for i in step]
        order = drawn + [i for i in order if i not in drawn]  # TRL plays the same scenarios, step by step
        res["train_agent"] = ta
        print(json.dumps({"train_agent": ta["median"]}), flush=True)
        if a.out:  # written again at the end; this copy survives a TRL side cut short
            Path(a.out).write_text(json.dumps(res, indent=1))
    tr = None
    if not a.skip_trl:
        try:
            tr = run_trl(a, model, [by_id[i] for i in order], tools, system, init, work, mem)
        except SystemExit as e:
            res["trl_error"] = str(e)[-4000:]
            print(res["trl_error"], flush=True)
    if tr:
        for s in tr["steps"]:
            s["ms_per_token"] = round(1000 * s["step_s"] / s["sampled_tokens"], 3) if s.get("sampled_tokens") else None
        tr["median"] = medians(tr["steps"], ["step_s", "rollout_s", "score_s", "train_s", "sampled_tokens", "mean_turns",
                                             "tool_calls", "trained_samples", "ms_per_token"])
        res["trl"] = tr
        print(json.dumps({"trl": tr["median"]}), flush=True)
    ta_s = res.get("train_agent", {}).get("median", {}).get("step_s")
    tr_s = res.get("trl", {}).get("median", {}).get("step_s")
    res["speedup"] = round(tr_s / ta_s, 2) if ta_s and tr_s else None
    res["wall_s"] = round(time.time() - t_all, 1)
    mem.stop.set()
    md = table(res)
    res["table"] = md
    print(md, flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1))
    if "train_agent_error" in res or "trl_error" in res:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
