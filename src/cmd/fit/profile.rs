//! How big a run is: the model, the tasks kept, SFT and GRPO settings, for a CPU (what fits
//! about 15 minutes of a 2-core machine) or a GPU (what shows the full effect), and what each
//! stage should take. Measured: `benches/RESULTS.md`, "The demo and CPU training speed" and
//! "One command for your own server".

use ta_sft::sft::SftConfig;
use ta_train::TrainConfig;
use ta_train::config::CurriculumMode;
use ta_trainer::Packing;

/// Settings of one profile.
pub struct Profile {
    pub gpu: bool,
    pub model: String,
    /// Which synthesized tasks train and validate.
    pub keep: TaskFilter,
    /// First N scenarios of each split (`None`: all).
    pub train_limit: Option<usize>,
    pub validation_limit: Option<usize>,
    /// The first this share of the train split gives SFT its reference traces; GRPO samples all
    /// of it. SFT on every train task saturates them (benches/RESULTS.md, "Synthesized tasks"),
    /// leaving GRPO groups without reward variance; tasks SFT never saw keep GRPO's groups
    /// informative.
    pub sft_share: f64,
    pub sft: SftConfig,
    pub grpo: TrainConfig,
    /// No GRPO (`--steps 0`): the SFT adapter is the run's result. `grpo`'s settings still size
    /// the engine and the episodes of the validation and the check set.
    pub sft_only: bool,
    /// The context the engine serves: slots are whole contexts, so a shorter one holds more
    /// episodes at once in the same KV memory.
    pub max_model_len: u32,
    /// Seed of the task synthesis (`scenarios synth` or `walk`), and so of the tasks' split.
    pub synth_seed: u64,
    /// Requests in flight to a `local/` teacher (`None`: the teacher command's own default). On
    /// a GPU the embedded engine batches them: at the commands' default a teacher rewording a GPU
    /// profile's tasks leaves most of the card idle.
    pub local_teacher_concurrency: Option<usize>,
}

/// The task synthesis's seed without `--seed`: the same tasks on every run of the same server.
pub const SYNTH_SEED: u64 = 1;

/// The tasks a profile keeps of those the synthesizer wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskFilter {
    /// Only these templates (`None`: all).
    pub templates: Option<&'static [&'static str]>,
    /// Only tasks up to this difficulty level (`None`: all).
    pub max_difficulty: Option<u64>,
}

impl TaskFilter {
    pub const ALL: TaskFilter = TaskFilter { templates: None, max_difficulty: None };

    /// The scenarios of `text` (JSON lines) this filter keeps, in order.
    pub fn apply(&self, text: &str) -> String {
        if *self == TaskFilter::ALL {
            return text.to_string();
        }
        let kept = |l: &&str| {
            serde_json::from_str::<serde_json::Value>(l).is_ok_and(|v| {
                self.templates.is_none_or(|ts| v[ta_types::scenario::EXTRA_TEMPLATE].as_str().is_some_and(|t| ts.contains(&t)))
                    && self.max_difficulty.is_none_or(|max| v["difficulty"].as_u64().is_some_and(|d| d <= max))
            })
        };
        text.lines().filter(kept).map(|l| format!("{l}\n")).collect()
    }

    /// The `scenarios synth` flags that choose these tasks before any query runs, so that a
    /// profile gets every task of its templates rather than their share of a capped mix.
    pub fn synth_argv(&self) -> Vec<String> {
        let mut argv = Vec::new();
        if let Some(templates) = self.templates {
            argv.extend(["--templates".to_string(), templates.join(",")]);
        }
        if let Some(max) = self.max_difficulty {
            argv.extend(["--max-difficulty".to_string(), max.to_string()]);
        }
        argv
    }
}

/// On CPU: one table and at most one condition (a count is level 1, each condition and each join
/// adds one; a walked lookup is level 1 or 2). After one epoch on 96 difficulty-1 traces
/// SmolLM2-135M answered 5 of 18 held-out counts and none of the one-row lookups of the same
/// level (benches/RESULTS.md, "The demo and CPU training speed").
pub const CPU_MAX_DIFFICULTY: u64 = 2;
/// The CPU profile's SFT share of its first [`CPU_TRAIN_LIMIT`] train tasks: the traces of 56
/// tasks, what one epoch on 2 cores affords.
pub const CPU_SFT_SHARE: f64 = 0.45;
/// The train tasks the CPU profile keeps (the first, in the synthesizer's order), so that its
/// SFT share stays at what 2 cores afford whatever the server offers.
pub const CPU_TRAIN_LIMIT: usize = 125;

/// The validation tasks the CPU profile keeps, and the episodes it plays at once: each model's
/// validation in one wave. At 16, the base model's and the SFT adapter's validations (played side
/// by side) ended in a second wave of four each, 12 s longer (benches/RESULTS.md, "A fresh clone
/// under 15 minutes").
pub const CPU_VALIDATION_TASKS: usize = 20;

/// The CPU profile's episode budget in written tokens: above what the SFT adapter's four-turn
/// episodes write, below what the base model spends running to the turn limit.
pub const CPU_EPISODE_TOKENS: u32 = 240;

/// GRPO steps of 8 x 8 on a GPU (`fit`'s default): on the demo server 48 steps raised the 88
/// hand-written questions over the SFT start in both runs, where 16 did in some runs and not in
/// others (benches/RESULTS.md, "Run 26"); the best validated step is kept either way.
pub const GPU_STEPS: u64 = 48;
/// The demo's GRPO steps on a GPU: a third of [`GPU_STEPS`], so that the README's first command
/// shows the whole product in about 8 minutes (benches/RESULTS.md, "The demo twice, one H200
/// each"); `demo --steps 48` runs `fit`'s number.
pub const DEMO_GPU_STEPS: u64 = 16;
const _: () = assert!(DEMO_GPU_STEPS < GPU_STEPS, "the demo is the short run");

/// The packaged model a short name stands for (`small`, `qwen0.5b`); any other name is a model
/// `train` takes as it is.
pub fn model_name(name: &str) -> &str {
    match name {
        "small" => "smollm2-135m-instruct",
        "qwen0.5b" => "qwen2.5-coder-0.5b-instruct",
        other => other,
    }
}

/// The flags that choose and size a profile, shared by `fit` and `demo`.
#[derive(clap::Args)]
pub struct ProfileArgs {
    /// Settings for `cpu` or `gpu` (default: `gpu` when PyTorch sees CUDA).
    #[arg(long, value_parser = ["cpu", "gpu"])]
    profile: Option<String>,
    /// GRPO steps (default with a GPU: 48 for `fit`, 16 for `demo`; 2 on CPU). Runs as many
    /// epochs of the train split as the steps need. 0: no GRPO; the run ends with the SFT adapter,
    /// validated against the base model and played on the check set (what GRPO would add is not
    /// always worth its time: benches/RESULTS.md, "Run 37").
    #[arg(long)]
    steps: Option<u64>,
    /// Share of the train split whose reference traces go to SFT (GRPO trains on all of it).
    /// Default: the profile's (see docs/demo.md).
    #[arg(long, value_name = "SHARE", value_parser = crate::args::positive_share)]
    sft_share: Option<f64>,
    /// Epochs of SFT over its traces. Default: the profile's (6 with a GPU, 1 on CPU); a larger
    /// --sft-share wants fewer (the 1,000-trace SFT of benches/RESULTS.md, "Run 17", ran 3).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    sft_epochs: Option<u32>,
    /// Use only the first N train tasks (SFT traces and GRPO). Default: all with a GPU, 125 on CPU.
    #[arg(long, value_name = "N", value_parser = crate::args::at_least_one)]
    train_limit: Option<usize>,
    /// Validate on only the first N validation tasks. Default: all with a GPU, 20 on CPU.
    #[arg(long, value_name = "N", value_parser = crate::args::at_least_one)]
    validation_limit: Option<usize>,
    /// One seed for the run's draws: the synthesized tasks and their split, the reference traces'
    /// slips, SFT's order, GRPO's task order and sampling, the sampled check. A second seed is an
    /// independent run of the same recipe. Default: the same tasks and draws on every run of the
    /// same server.
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// How GRPO draws its tasks: `uniform` (the default: a seeded order), `adaptive` (easy to
    /// hard, then by each task's recent pass rate) or `frontier` (by the share of the recent
    /// groups of the task's template that split right from wrong; no gain on people's questions:
    /// benches/RESULTS.md, "Run 30").
    #[arg(long, value_name = "MODE", value_parser = curriculum)]
    curriculum: Option<CurriculumMode>,
}

/// A curriculum mode by its name in `[curriculum] mode`.
fn curriculum(name: &str) -> Result<CurriculumMode, String> {
    serde_json::from_value(name.into()).map_err(|e| e.to_string())
}

impl ProfileArgs {
    /// Whether the run uses the GPU profile: `--profile`, else whether PyTorch sees CUDA.
    pub async fn gpu(&self) -> anyhow::Result<bool> {
        Ok(match self.profile.as_deref() {
            Some(p) => p == "gpu",
            None => ta_python::PythonEnv::ensure()?.has_cuda().await,
        })
    }

    /// The profile for `model` (default: `small` on CPU, `qwen0.5b` on GPU) with these flags;
    /// `gpu_steps` is the command's GRPO steps on a GPU when `--steps` is not given.
    pub fn profile(&self, gpu: bool, model: Option<&str>, gpu_steps: u64) -> Profile {
        let model = model.unwrap_or(if gpu { "qwen0.5b" } else { "small" });
        let steps = self.steps.or(gpu.then_some(gpu_steps));
        let o = Overrides {
            steps,
            train_limit: self.train_limit,
            validation_limit: self.validation_limit,
            sft_share: self.sft_share,
            sft_epochs: self.sft_epochs,
            seed: self.seed,
            curriculum: self.curriculum,
        };
        profile(gpu, model, &o)
    }
}

/// The flags a user may set over a profile's defaults.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub steps: Option<u64>,
    pub train_limit: Option<usize>,
    pub validation_limit: Option<usize>,
    pub sft_share: Option<f64>,
    pub sft_epochs: Option<u32>,
    pub seed: Option<u64>,
    pub curriculum: Option<CurriculumMode>,
}

pub fn profile(gpu: bool, model: &str, o: &Overrides) -> Profile {
    let model = model_name(model);
    let mut sft = SftConfig { base_model: model.into(), ..SftConfig::default() };
    let mut grpo = TrainConfig { base_model: model.into(), ..TrainConfig::default() };
    grpo.rollout.eval_every = 0;
    let (mut train_limit, mut validation_limit) = (o.train_limit, o.validation_limit);
    // `--steps 0` runs no GRPO; `train`'s own `max_steps = 0` would mean no limit.
    let sft_only = o.steps == Some(0);
    let steps = o.steps.filter(|&n| n > 0);
    let (keep, default_share, max_model_len, local_teacher_concurrency);
    if gpu {
        keep = TaskFilter::ALL;
        // About 120 traces: enough to learn the tool-calling workflow, few enough to leave most
        // train tasks unsolved at GRPO's start. To be tuned by measurement (docs/demo.md).
        default_share = 0.1;
        // Four samples per validation task: pass@1 with an interval tight enough to see GRPO's
        // gain, at 5x the greedy validation's episodes.
        grpo.rollout.eval_rollouts = 4;
        sft.epochs = 6;
        sft.optim.lr = 2e-4;
        grpo.rollout.max_steps = steps.unwrap_or(GPU_STEPS);
        grpo.rollout.scenarios_per_step = 8;
        grpo.rollout.rollouts_per_scenario = 8;
        grpo.optim.lr = 2e-5;
        // A step's 64 episodes in one wave, and validation and the check set four times as wide
        // as the default 32 (the check set's eval had 8): one model's validation played in 35 s
        // where it took 60 s at 32 (benches/RESULTS.md, "One engine for the whole run").
        grpo.rollout.concurrency = 128;
        // A local teacher's requests batched as widely as the episodes (the benches' paraphrase
        // runs used as many: benches/RESULTS.md, "Run 17").
        local_teacher_concurrency = Some(grpo.rollout.concurrency);
        // The longest episode the budget allows (8 turns, 2,048 written tokens, tool results cut
        // at 4,000 characters, the system prompt) stays under 16k tokens; the model's own 32k
        // would give each episode twice the KV memory it can use. The commands' own default
        // view (10,000 characters) would not fit eight results in it.
        grpo.rollout.tool_result_max_chars = 4000;
        max_model_len = 16384;
        // Uniform task order (the default curriculum): from the same SFT adapter it gained more
        // than the adaptive curriculum, whose easy-first epoch makes most first-round groups flat
        // (benches/RESULTS.md, "GRPO ablation"). Dynamic sampling, on by default, replaces the
        // flat groups.
    } else {
        // What SmolLM2-135M learns from a few dozen traces on 2 cores, so the table can show a
        // rise in correct answers rather than only in reward.
        keep = TaskFilter { templates: None, max_difficulty: Some(CPU_MAX_DIFFICULTY) };
        default_share = CPU_SFT_SHARE;
        train_limit = train_limit.or(Some(CPU_TRAIN_LIMIT));
        validation_limit = validation_limit.or(Some(CPU_VALIDATION_TASKS));
        // Sampled validation would multiply the CPU's slowest phase; the greedy table is the
        // CPU profile's claim.
        grpo.rollout.eval_rollouts = 0;
        sft.epochs = 1;
        // Eight traces a step share one system prompt: as a prefix tree (below) a step's forward
        // runs it once, so larger steps cost fewer tokens per trace.
        sft.batch_size = 8;
        sft.optim.lr = 5e-4;
        sft.lora.r = 16;
        sft.max_seq_len = 3072;
        // A real model on a CPU: prefix trees (docs/training.md, "Packing") of up to 4,096
        // distinct tokens. In float32 a tree's activations grow with its tokens: at 8,192 a GRPO
        // step's one tree was killed for memory beside the engine on a 24 GB VM, and a step takes
        // the same time either way (benches/RESULTS.md, "The demo and CPU training speed").
        sft.trainer.packing = Packing::PrefixTree;
        grpo.trainer.packing = Packing::PrefixTree;
        sft.trainer.micro_batch_tokens = 4096;
        grpo.trainer.micro_batch_tokens = 4096;
        grpo.rollout.max_steps = steps.unwrap_or(2);
        grpo.rollout.scenarios_per_step = 3;
        grpo.rollout.rollouts_per_scenario = 4;
        // The workflow takes four turns (list, describe, query, answer) of at most ~40 tokens; one
        // spare turn, and no more, for the base model to spend.
        grpo.rollout.max_turns = 5;
        grpo.rollout.max_tokens = 96;
        // The SFT adapter's episodes write at most ~150 tokens; the base model's run to the turn
        // limit at ~370. Stopped at 240 (after the turn that reaches it), the base model's
        // validation writes a third fewer tokens and no SFT answer changes (docs/demo.md).
        grpo.rollout.max_episode_tokens = CPU_EPISODE_TOKENS;
        grpo.rollout.tool_result_max_chars = 1500;
        grpo.rollout.concurrency = CPU_VALIDATION_TASKS;
        local_teacher_concurrency = None;
        // Short contexts keep the CPU's prompt processing (the bulk of its time) small.
        max_model_len = 4096;
        // Replacing flat groups would multiply the CPU's slowest phase by up to
        // `max_oversample`, and two steps are no learning claim to protect.
        grpo.rollout.dynamic_sampling = false;
        // The engine and the trainer would share the same two cores: overlapping them gives
        // neither more compute, and the CPU demo's measured table was the synchronous loop's.
        grpo.rollout.staleness = 0;
        grpo.optim.lr = 5e-5;
    }
    if let Some(epochs) = o.sft_epochs {
        sft.epochs = epochs;
    }
    if let Some(seed) = o.seed {
        (sft.seed, grpo.seed) = (seed, seed);
    }
    if let Some(mode) = o.curriculum {
        grpo.curriculum.mode = mode;
    }
    let synth_seed = o.seed.unwrap_or(SYNTH_SEED);
    Profile {
        gpu,
        model: model.into(),
        keep,
        train_limit,
        validation_limit,
        sft_share: o.sft_share.unwrap_or(default_share),
        sft,
        grpo,
        sft_only,
        max_model_len,
        synth_seed,
        local_teacher_concurrency,
    }
}

/// Epochs of `train` scenarios that `steps` steps of `per_step` scenarios need, so `--steps`
/// is what runs (one epoch would stop a 10-step run on 68 scenarios after 9).
pub fn epochs_for(steps: u64, per_step: usize, train: usize) -> u32 {
    let needed = steps * per_step as u64;
    u32::try_from(needed.div_ceil(train.max(1) as u64)).unwrap_or(u32::MAX).max(1)
}

/// What each stage costs on a profile's hardware, for the estimate printed before it starts.
/// Rough by design (the base model's episodes run long, a user's server may be slow); the run
/// records what each stage really took in `fit.json`, and benches/RESULTS.md ("One command for
/// your own server", "Asynchronous GRPO and the demo's whole run") sets these beside it.
#[derive(Debug, Clone, Copy)]
pub struct Rates {
    /// Starting the engine or the trainer (Python, the model's weights).
    pub start: f64,
    /// One SFT trace for one epoch.
    pub sft_trace: f64,
    /// One greedy episode of one model, in a batch of many.
    pub episode: f64,
    /// The longest episode of a model's evaluation (the base model running out of turns): what a
    /// small batch costs at least.
    pub episode_wall: f64,
    /// One GRPO step of the profile's shape.
    pub grpo_step: f64,
    /// Rewording one task with a local teacher and solving its rewordings (`None`: not measured
    /// on this hardware, no estimate printed).
    pub teacher_task: Option<f64>,
}

impl Rates {
    pub fn of(gpu: bool) -> Rates {
        if gpu {
            // One H100, Qwen2.5-Coder-0.5B, the GPU profile (asynchronous GRPO, episode budget).
            // The teacher: a 1.5B GGUF, one fit a card as `fit` runs (benches/RESULTS.md, "The
            // paraphrase alone on a card"; two fits sharing a card take longer, "Run 31"). SFT's
            // pass over a trace: between the H100's demo alone and the H200's shared fits ("Run 35").
            Rates { start: 60.0, sft_trace: 0.1, episode: 0.06, episode_wall: 20.0, grpo_step: 10.0, teacher_task: Some(0.09) }
        } else {
            // The 2-core VM without AMX, SmolLM2-135M, the CPU profile.
            Rates { start: 30.0, sft_trace: 6.0, episode: 6.0, episode_wall: 60.0, grpo_step: 120.0, teacher_task: None }
        }
    }

    /// `models` evaluations of `tasks` tasks, `samples` episodes each.
    pub fn evaluation(&self, models: f64, tasks: usize, samples: f64) -> f64 {
        if samples == 0.0 || tasks == 0 {
            return 0.0;
        }
        models * (self.episode_wall + self.episode * samples * tasks as f64)
    }
}

/// `seconds` as people say it: "about 40 s", "about 3 min".
pub fn about(seconds: f64) -> String {
    if seconds < 90.0 { format!("about {} s", (seconds / 10.0).ceil().max(1.0) * 10.0) } else { format!("about {} min", (seconds / 60.0).round()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_set_the_epochs() {
        // The GPU profile on the 68 hand-written train questions: 10 steps of 8 need 2 epochs
        // (one epoch stopped the run after 9 steps).
        assert_eq!(epochs_for(10, 8, 68), 2);
        assert_eq!(epochs_for(2, 3, 32), 1);
        assert_eq!(epochs_for(30, 8, 1200), 1);
        assert_eq!(epochs_for(0, 8, 10), 1);
        assert_eq!(epochs_for(5, 8, 0), 40, "no train scenarios: train reports that itself");
    }

    #[test]
    fn the_task_filter_keeps_those_tasks_in_order() {
        let text = "{\"id\":\"a\",\"template\":\"count_rows\",\"difficulty\":1}\n{\"id\":\"b\",\"template\":\"lookup\",\"difficulty\":1}\n\
                    {\"id\":\"c\",\"template\":\"count_where\",\"difficulty\":2}\n{\"id\":\"e\",\"template\":\"count_where\",\"difficulty\":3}\n{\"id\":\"d\"}\n";
        let counts = TaskFilter { templates: Some(&["count_rows", "count_where"]), max_difficulty: Some(2) };
        assert_eq!(counts.apply(text), "{\"id\":\"a\",\"template\":\"count_rows\",\"difficulty\":1}\n{\"id\":\"c\",\"template\":\"count_where\",\"difficulty\":2}\n");
        let easy = TaskFilter { templates: None, max_difficulty: Some(1) };
        assert_eq!(easy.apply(text).lines().count(), 2);
        assert_eq!(TaskFilter::ALL.apply(text), text);
    }

    #[test]
    fn each_command_brings_its_gpu_steps_and_steps_wins() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            size: ProfileArgs,
        }
        let size = |flags: &[&str]| <Cli as clap::Parser>::parse_from(std::iter::once("t").chain(flags.iter().copied())).size;
        let steps = |p: Profile| p.grpo.rollout.max_steps;
        assert_eq!(steps(size(&[]).profile(true, None, GPU_STEPS)), GPU_STEPS, "fit");
        assert_eq!(steps(size(&[]).profile(true, None, DEMO_GPU_STEPS)), DEMO_GPU_STEPS, "demo");
        assert_eq!(steps(size(&["--steps", "5"]).profile(true, None, GPU_STEPS)), 5, "--steps wins");
        assert_eq!(steps(size(&[]).profile(false, None, GPU_STEPS)), 2, "a CPU keeps its own");
        // --steps 0: no GRPO, on either profile; train's config keeps a real step count, since
        // `max_steps = 0` there means no limit.
        for gpu in [true, false] {
            let p = size(&["--steps", "0"]).profile(gpu, None, GPU_STEPS);
            assert!(p.sft_only && p.grpo.rollout.max_steps > 0, "gpu {gpu}");
            assert!(!size(&["--steps", "1"]).profile(gpu, None, GPU_STEPS).sft_only && !size(&[]).profile(gpu, None, GPU_STEPS).sft_only);
        }
    }

    #[test]
    fn profiles_pick_the_model_and_size_the_work() {
        let none = Overrides::default();
        let cpu = profile(false, "small", &none);
        assert_eq!(cpu.model, "smollm2-135m-instruct");
        assert_eq!((cpu.grpo.rollout.max_steps, cpu.sft.epochs), (2, 1));
        assert_eq!((cpu.train_limit, cpu.validation_limit), (Some(CPU_TRAIN_LIMIT), Some(CPU_VALIDATION_TASKS)));
        assert_eq!(cpu.grpo.rollout.concurrency, CPU_VALIDATION_TASKS, "a validation in one wave");
        assert_eq!(cpu.keep.max_difficulty, Some(CPU_MAX_DIFFICULTY), "the CPU keeps the easiest tasks");
        assert_eq!((cpu.sft.trainer.packing, cpu.grpo.trainer.packing), (Packing::PrefixTree, Packing::PrefixTree));
        assert_eq!((cpu.sft_share, cpu.grpo.rollout.eval_rollouts), (CPU_SFT_SHARE, 0));
        assert!(!cpu.grpo.rollout.dynamic_sampling, "the CPU profile does not oversample its slowest phase");
        assert_eq!(cpu.grpo.rollout.staleness, 0, "two cores: the engine and the trainer take turns");
        let c = &cpu.grpo.rollout;
        assert!(c.max_episode_tokens == CPU_EPISODE_TOKENS && c.max_episode_tokens < c.max_turns * c.max_tokens, "the budget stops an episode before its turns run out");
        let limited = Overrides { train_limit: Some(6), validation_limit: Some(2), ..Default::default() };
        assert_eq!(profile(false, "small", &limited).validation_limit, Some(2), "--validation-limit wins");
        let gpu = profile(true, "qwen0.5b", &Overrides { steps: Some(3), ..Default::default() });
        assert_eq!(gpu.model, "qwen2.5-coder-0.5b-instruct");
        assert_eq!(gpu.grpo.rollout.max_steps, 3, "--steps wins");
        assert_eq!((gpu.train_limit, gpu.validation_limit), (None, None), "all scenarios on a GPU");
        assert_eq!(gpu.keep, TaskFilter::ALL, "the GPU trains on all synthesized tasks");
        assert_eq!(gpu.grpo.trainer.packing, Packing::Rows, "batched rows on a GPU");
        assert!(gpu.sft_share < 0.5, "SFT on a part of the train split: {}", gpu.sft_share);
        assert!(gpu.grpo.rollout.eval_rollouts >= 2, "sampled validation gives pass@1 with an interval");
        assert!(gpu.grpo.rollout.dynamic_sampling, "from an SFT start most first-round groups are flat");
        let r = &gpu.grpo.rollout;
        assert!(r.concurrency >= r.scenarios_per_step * r.rollouts_per_scenario as usize, "a step's episodes in one wave");
        assert!(gpu.max_model_len >= 8 * r.max_episode_tokens && gpu.max_model_len > cpu.max_model_len, "{}", gpu.max_model_len);
        assert_eq!(profile(true, "qwen0.5b", &Overrides { sft_share: Some(0.5), ..Default::default() }).sft_share, 0.5, "--sft-share wins");
        assert_eq!((gpu.sft.epochs, profile(true, "qwen0.5b", &Overrides { sft_epochs: Some(3), ..Default::default() }).sft.epochs), (6, 3), "--sft-epochs wins");
        assert_eq!(profile(false, "small", &Overrides { sft_epochs: Some(2), ..Default::default() }).sft.epochs, 2, "on a CPU too");
        assert_eq!(gpu.grpo.curriculum.mode, CurriculumMode::Uniform);
        assert!(
            gpu.local_teacher_concurrency.is_some_and(|n| n >= r.scenarios_per_step * r.rollouts_per_scenario as usize),
            "a local teacher's requests batched as a step's episodes are"
        );
        assert_eq!(cpu.local_teacher_concurrency, None, "two cores: the teacher command's own default");
        let frontier = Overrides { curriculum: Some(curriculum("frontier").unwrap()), ..Default::default() };
        assert_eq!(profile(true, "qwen0.5b", &frontier).grpo.curriculum.mode, CurriculumMode::Frontier, "--curriculum wins");
        let e = curriculum("frontiers").unwrap_err();
        assert!(e.contains("uniform") && e.contains("frontier"), "the error names the modes: {e}");
        assert_eq!(profile(true, "/models/x.gguf", &none).grpo.base_model, "/models/x.gguf");
        assert_eq!(profile(true, "qwen0.5b", &none).grpo.rollout.max_steps, GPU_STEPS);
        for p in [cpu, gpu] {
            assert_eq!(p.sft.base_model, p.grpo.base_model);
            assert_eq!(p.grpo.rollout.eval_every, 0, "validation only before and after: it is the table");
        }
    }

    #[test]
    fn one_seed_draws_the_tasks_sft_and_grpo() {
        let default = profile(true, "qwen0.5b", &Overrides::default());
        assert_eq!((default.synth_seed, default.sft.seed, default.grpo.seed), (SYNTH_SEED, SftConfig::default().seed, TrainConfig::default().seed));
        for gpu in [true, false] {
            let seeded = profile(gpu, "qwen0.5b", &Overrides { seed: Some(7), ..Default::default() });
            assert_eq!((seeded.synth_seed, seeded.sft.seed, seeded.grpo.seed), (7, 7, 7), "--seed reaches every draw");
        }
    }

    #[test]
    fn estimates_read_as_people_say_them() {
        assert_eq!(about(3.0), "about 10 s");
        assert_eq!(about(41.0), "about 50 s");
        assert_eq!(about(200.0), "about 3 min");
        let gpu = Rates::of(true);
        assert!(Rates::of(false).grpo_step > gpu.grpo_step);
        assert_eq!(gpu.evaluation(2.0, 100, 0.0), 0.0, "no sampled validation costs nothing");
        assert!(gpu.evaluation(3.0, 27, 1.0) > 3.0 * gpu.episode_wall, "a small batch still waits for its longest episode");
    }
}
