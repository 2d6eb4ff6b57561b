"""The trainer: a LoRA adapter updated by GRPO or SFT steps that the Rust side drops in a mailbox.

    python -m train_agent.trainer --config CONFIG.json
    python -m train_agent.trainer merge --model SPEC --adapter DIR --out DIR [--dtype bfloat16]

The process stays alive across steps: one `pytorch_lightning.Trainer.fit` over an endless dataset
that waits for the next step file. One step file in = exactly one optimizer step out. The same
files work for one process, DDP and multi-node (a shared filesystem): every rank reads the whole
step and takes its share (see batches.py).

Config (JSON): every key below is required and no other is allowed. The values, defaults included,
are decided on the Rust side, which owns this contract (crates/trainer: `TrainerConfig`); a
missing or unknown key is an error that names it, so the two sides cannot drift apart. The allowed
values of enum keys are Rust's enums; the tables that dispatch on them here name the same ones
(tests/test_contract.py checks it against contract/allowed_values.json).

    model                   spec for models.ModelSource.parse: hub id, directory, .gguf, packaged name
    output_dir              the run directory
    lora                    {r, alpha, dropout, target_modules: "all-linear" | [names], use_rslora,
                             init_adapter: null | PEFT dir to start from}
    optim                   {lr, weight_decay, betas: [b1, b2], eps, warmup_steps,
                             schedule (SCHEDULES), total_steps, min_lr_ratio,
                             max_grad_norm (0 or null: no clipping)}
    loss                    {kind (POLICY_GRADIENT), epsilon_low, epsilon_high,
                             beta (KL coefficient; reference = lora.init_adapter when set, else
                             the base model: adapter off),
                             aggregation (loss.AGGREGATIONS),
                             max_len_norm: null | Dr. GRPO's constant (needed by seq-mean-token-sum-norm),
                             temperature (logprobs are of softmax(logits / temperature): 1 for the
                             engine's raw logprobs, the sampling temperature for processed_logprobs)}
    micro_batch_tokens      tokens per forward/backward: padded (rows * longest row) or distinct
                            (prefix-tree)
    gradient_checkpointing  true | false
    packing                 batches.PACKINGS: "rows" | "prefix-tree" (not with gradient checkpointing)
    precision               "auto" (bf16-mixed on GPU and on CPUs fast at bf16: AMX, AMD AVX512-BF16; else 32-true) | "bf16-mixed" | "bf16-true" | "32-true"
    strategy                "auto" | "ddp" ("fsdp" is refused for now, with a hint)
    accelerator, devices, num_nodes      as in Lightning
    loggers                 {csv, tensorboard, wandb_project: null | name}
    seed                    LoRA dropout is reseeded from it at every step
    resume_from             null | a checkpoint dir (…/checkpoints/step-000042) to continue from
    poll_interval_s         how often an idle trainer looks at the inbox

Mailbox, under {output_dir}/trainer/:

    inbox/step-000042.json   written by Rust (atomically: write a temp name that does not end in
                             .json, then rename): {step, samples, rollout (optional: the step's
                             rollout metrics, logged as rollout/<name> beside the trainer's)}.
                             The trainer takes the lowest step number above the
                             last one it trained (or resumed from), so numbering may start at 0 or 1.
    inbox/validation-000042.json   written by Rust (atomically) after it validated at that step
                             (0: before training): {step, metrics}. Rank 0 logs the metrics as
                             validation/<name> at that step, after each step it trains and when it
                             stops, each file once per process (Rust writes the final one before stop).
    inbox/stop               ends the process with exit code 0 once every step file present when it
                             appeared is trained. Rust removes a stale one before starting a trainer.
    outbox/step-000042.json  written by rank 0 (atomically) after the optimizer step and the
                             checkpoint: the metrics below. Rust waits for it.
    error.json               {error, traceback, rank} written by a failing rank before it exits 1.
    logs/version_K/metrics.csv   Lightning CSVLogger (TensorBoard / W&B when installed and asked for).

Step files may also ask for no checkpoint (`checkpoint: false`) and for the token-mean loss of
held-out `eval_samples` before and/or after the update (`eval_before`, `eval_after`: SFT's eval loss;
see batches.py).

Outbox metrics: step, loss, policy_loss, kl (token mean of k3; null when beta is 0), entropy
(token mean), clip_fraction_low, clip_fraction_high (share of trained tokens whose clipped term
wins), ratio_mean (null for SFT), grad_norm (before clipping; null when not finite, and then
skipped_nonfinite_grad is true and the update was skipped), lr (used by this step), samples,
tokens (real input tokens), trained_tokens, micro_batches (per rank), tokens_per_s, wait_s (idle,
waiting for the file), data_s, forward_backward_s, optimizer_s, save_s, step_s (all but wait),
peak_memory_gb, peak_memory_kind ("cuda" allocated or "cpu_rss"), checkpoint (the dir, or null when the step
file said checkpoint: false), eval_loss, eval_loss_before, eval_tokens (null unless asked for).

Checkpoints: {output_dir}/checkpoints/step-000042/adapter/ (PEFT format: PeftModel.from_pretrained,
vLLM's load_lora_adapter) and trainer_state.pt (step, optimizer, scheduler, config). Randomness
(LoRA dropout) is reseeded at every step from (seed, step, rank), so a resumed run draws exactly
what an uninterrupted one would without storing generator states.
"""


def __getattr__(name: str):
    # `from train_agent.trainer import load_config` (crates/trainer/tests/contract.rs), imported on
    # first use so that `python -m train_agent.trainer.sft_data` does not load torch through here
    if name == "load_config":
        from train_agent.trainer.config import load_config

        return load_config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
