"""The trainer process (`python -m train_agent.trainer`, see module.py) and SFT's data preparation
(`python -m train_agent.trainer.sft_data`).

`load_config` is the config parser the Rust side's contract tests call
(`from train_agent.trainer import load_config`, crates/trainer/tests/contract.rs); it is imported on
first use, so that `python -m train_agent.trainer.sft_data` does not load torch through this package.
"""


def __getattr__(name: str):
    if name == "load_config":
        from train_agent.trainer.module import load_config

        return load_config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
