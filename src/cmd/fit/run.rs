//! A whole run, stage by stage: the tasks (synthesis or walk, and the teacher's), reference
//! traces of part of the train split, SFT on them, GRPO from the SFT adapter on the whole train
//! split (validating base, SFT and the result; with `--steps 0` no GRPO, and an `eval` validates
//! base and SFT instead), and the check set. Each stage is one of the ordinary subcommands, run
//! with the flags it prints, in its own directory under `--out`; a stage whose output is complete
//! is skipped, so running the same command again after a Ctrl-C or a crash continues where it
//! stopped. What each stage took goes to `fit.json`.
//!
//! Ctrl-C: the run listens for it from its start ([`crate::interrupted`]), so a press in any
//! stage stops the run at the next safe point with every finished stage kept. The stages that
//! listen themselves (collect, sft, train, eval, paraphrase, generate) stop as they do when run
//! alone; the others run under [`unless_interrupted`]; and no stage starts after a press.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use serde::{Deserialize, Serialize};
use ta_eval::rundir::RunDir;
use ta_metrics::{Comparison, Metrics, metrics_table};
use ta_python::PythonEnv;
use ta_sft::reference::DEFAULT_RECOVERY_SHARE;
use ta_trainer::checkpoint::last_complete_step;

use super::engine;
use super::plan::{Synthesizer, TaskSource};
use super::profile::{Profile, Rates, about, epochs_for};
use crate::cmd::{collect, curate, eval, scenarios, sft, train};
use crate::interrupted::{self, Interrupted};
use crate::setup::RunSetup;
use crate::stdout::outln;

/// One run to do.
pub struct Job {
    /// `fit` or `demo`, for messages.
    pub command: &'static str,
    pub out: PathBuf,
    /// The flags that name the server to every stage.
    pub server: Vec<String>,
    /// Whether the user chose the tools (the check set then gets the same flags).
    pub chooses_tools: bool,
    pub source: TaskSource,
    /// Tasks `scenarios synth` writes before the profile's filter.
    pub synth_n: usize,
    pub profile: Profile,
    pub check_set: Option<CheckSet>,
    pub recipe: Recipe,
}

/// Choices in how the training data is made that the profile leaves alone: off by default, each
/// measured (or to be measured) against its absence by the benches.
pub struct Recipe {
    /// `collect --recovery-share` for SFT's reference traces.
    pub recovery_share: f64,
    /// `scenarios synth --value-lookups` (SQL servers).
    pub value_lookups: bool,
    /// `scenarios synth --join-mix` (SQL servers).
    pub join_mix: Option<[f64; 3]>,
}

impl Default for Recipe {
    fn default() -> Self {
        Recipe { recovery_share: DEFAULT_RECOVERY_SHARE, value_lookups: false, join_mix: None }
    }
}

/// Questions training never sees, evaluated on base, SFT and SFT+GRPO at the end.
pub struct CheckSet {
    pub scenarios: CheckScenarios,
    /// How many questions it holds (counted when it was read and checked).
    pub questions: usize,
    /// How the table names them, e.g. "the 88 hand-written questions".
    pub label: String,
    /// Episodes a question that SFT and SFT+GRPO also play sampled (0: none): a paired pass@1
    /// over several episodes has the power one greedy episode a question lacks (on the demo's
    /// 88, greedy p = 0.15 where the same adapters' sampled check gave p = 0.011:
    /// benches/RESULTS.md, "Run 26").
    pub samples: u32,
}

/// `fit.json`'s record of the sampled check set (an `eval` of its own).
const SAMPLED_CHECK_STAGE: &str = "eval sampled";
/// `fit.json`'s record of the SFT adapter's validation against the base model when no GRPO runs
/// (`--steps 0`; GRPO's run validates both otherwise).
const VALIDATION_STAGE: &str = "eval validation";

pub enum CheckScenarios {
    File(PathBuf),
    /// Embedded in the binary (the demo's), written to `--out` when used.
    Text(&'static str),
}

/// What a stage took, in `fit.json`.
#[derive(Debug, Serialize, Deserialize)]
struct StageRecord {
    stage: String,
    command: String,
    estimate_s: Option<f64>,
    /// `None` while it runs (or when it was stopped).
    seconds: Option<f64>,
}

/// The stages' records, written after every stage; a rerun keeps those of the stages it skips.
struct Stages {
    /// `fit` or `demo`, for the message of a run stopped by Ctrl-C.
    command: &'static str,
    path: PathBuf,
    records: Vec<StageRecord>,
    next: usize,
    of: usize,
}

impl Stages {
    fn open(command: &'static str, path: PathBuf, of: usize) -> Stages {
        let records = std::fs::read_to_string(&path).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default();
        Stages { command, path, records, next: 0, of }
    }

    /// Prints the stage's command and estimate; returns its flags parsed as the subcommand's.
    fn start<T: clap::Args>(&mut self, name: &str, what: &str, argv: &[String], estimate: Option<f64>) -> Result<(T, Instant)> {
        self.start_as(name, name, what, argv, estimate)
    }

    /// [`Stages::start`] for a stage recorded as `stage` that runs the subcommand `name`. After
    /// a Ctrl-C (pressed in a stage that went on to finish, or between stages) it starts nothing
    /// and stops the run.
    fn start_as<T: clap::Args>(&mut self, stage: &str, name: &str, what: &str, argv: &[String], estimate: Option<f64>) -> Result<(T, Instant)> {
        if interrupted::pressed() {
            return interrupted(self.command);
        }
        self.next += 1;
        let guess = estimate.map(|s| format!(" ({})", about(s))).unwrap_or_default();
        let command = format!("train-agent {name} {}", shell_words(argv));
        eprintln!("\n[{}/{}] {what}{guess}\n      {command}", self.next, self.of);
        let parsed = parse(name, argv)?;
        self.records.retain(|r| r.stage != stage);
        self.records.push(StageRecord { stage: stage.into(), command, estimate_s: estimate, seconds: None });
        Ok((parsed, Instant::now()))
    }

    /// The shared engine's start-up (beside collect and SFT, or after SFT), recorded once it is
    /// ready.
    fn engine(&mut self, took: Duration, beside: bool) -> Result<()> {
        let secs = took.as_secs_f64();
        let when = if beside { "beside collect and SFT" } else { "after SFT" };
        eprintln!("engine for train and eval: ready after {secs:.0} s ({when})");
        self.records.retain(|r| r.stage != ENGINE_STAGE);
        self.records.push(StageRecord { stage: ENGINE_STAGE.into(), command: format!("the embedded engine, started {when}"), estimate_s: None, seconds: Some(secs) });
        self.write()
    }

    /// A stage complete from an earlier run.
    fn skip(&mut self, name: &str) {
        self.next += 1;
        eprintln!("{name}: done in an earlier run");
    }

    fn done(&mut self, started: Instant) -> Result<()> {
        let secs = started.elapsed().as_secs_f64();
        eprintln!("      took {:.0} s", secs);
        if let Some(r) = self.records.last_mut() {
            r.seconds = Some(secs);
        }
        self.write()
    }

    fn write(&self) -> Result<()> {
        let text = serde_json::to_string_pretty(&self.records)?;
        std::fs::write(&self.path, text).with_context(|| format!("cannot write {}", self.path.display()))
    }
}

/// A stage's subcommand parsed from the flags it is shown with.
fn parse<T: clap::Args>(name: &str, argv: &[String]) -> Result<T> {
    let parsed =
        Stage::<T>::try_parse_from(std::iter::once(name.to_string()).chain(argv.iter().cloned())).with_context(|| format!("built bad flags for `{name}` (a bug)"))?;
    Ok(parsed.args)
}

/// `fit.json`'s record of the shared engine's start-up (see [`super::engine`]).
const ENGINE_STAGE: &str = "engine";

/// One stage's subcommand parsed from the flags it is shown with.
#[derive(Parser)]
struct Stage<T: clap::Args> {
    #[command(flatten)]
    args: T,
}

fn shell_words(argv: &[String]) -> String {
    let quote = |a: &String| if a.contains([' ', '"', '\'']) { format!("{a:?}") } else { a.clone() };
    argv.iter().map(quote).collect::<Vec<_>>().join(" ")
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// The subcommands a job runs, in order.
pub fn commands(job: &Job) -> Vec<&'static str> {
    let mut c = job.source.commands();
    c.extend(["collect", "curate", "sft", if job.profile.sft_only { VALIDATION_STAGE } else { "train" }]);
    if let Some(check) = &job.check_set {
        c.push("eval");
        if check.samples > 0 {
            c.push(SAMPLED_CHECK_STAGE);
        }
    }
    c
}

/// Runs `job`, stopped by Ctrl-C at the next safe point: the one listener is installed first
/// ([`interrupted::listen`]), so that no stage swallows a press. A stage that fails after a press
/// (the Python children got the terminal's SIGINT too, and an engine killed while it starts
/// fails its start) stops the run as interrupted, not as failed: the same command continues it,
/// and shows the error again if there was another cause.
pub async fn execute(job: Job) -> Result<()> {
    let command = job.command;
    interrupted::listen();
    match run_job(job).await {
        Err(e) if interrupted::pressed() && !e.is::<Interrupted>() => {
            tracing::debug!("after Ctrl-C: {e:#}");
            interrupted(command)
        }
        done => done,
    }
}

/// Runs a stage that does not listen for Ctrl-C itself (synth, walk, curate, the engine's
/// start-up) until it ends or Ctrl-C is pressed. A press drops it where it waits, which kills its
/// MCP server or engine; its output is not complete, so the rerun does it again.
async fn unless_interrupted<T>(command: &str, stage: impl Future<Output = Result<T>>) -> Result<T> {
    tokio::select! {
        biased;
        () = interrupted::ctrl_c() => interrupted(command),
        done = stage => done,
    }
}

async fn run_job(job: Job) -> Result<()> {
    let of = commands(&job).len();
    let Job { command, out, server, chooses_tools, source, synth_n, profile, check_set, recipe } = job;
    let Profile { gpu, keep, train_limit, validation_limit, sft_share, mut sft, mut grpo, sft_only, max_model_len, synth_seed, local_teacher_concurrency, .. } = profile;
    let rates = Rates::of(gpu);
    // A finished stage is not redone: a run with GRPO and one without would mix their results
    // (the check set played with GRPO's adapter, say, tabled as SFT's).
    let [sft_dir, grpo_dir, validation_dir, check_dir, sampled_dir] = REPORTED.map(|d| out.join(d));
    let (other, other_steps) = if sft_only { (&grpo_dir, "1 or more") } else { (&validation_dir, "0") };
    anyhow::ensure!(!other.exists(), "{} holds a run with --steps {other_steps} ({} is there)\nhint: give this run its own --out", out.display(), other.display());
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut stages = Stages::open(command, out.join(STAGES_FILE), of);
    let with_server = |rest: &[String]| -> Vec<String> { server.iter().cloned().chain(rest.iter().cloned()).collect() };

    // What the model is shown of a tool result, the same in every stage: the walk asks only about
    // that much, the reference traces and the check set show that much.
    let view = grpo.rollout.tool_result_max_chars.to_string();
    // The tasks, checked by running them through the server. What an episode shows and how long
    // it runs: the walk asks only what one can answer.
    let mut walk = vec!["--seed".into(), synth_seed.to_string(), "--tool-result-max-chars".into(), view.clone()];
    walk.extend(["--max-turns".into(), grpo.rollout.max_turns.to_string()]);
    // `scenarios synth`'s choices: how many tasks, the profile's task filter, and the recipe's phrasing
    let mut synth = vec!["--seed".into(), synth_seed.to_string(), "--n".into(), synth_n.to_string()];
    synth.extend(keep.synth_argv());
    if recipe.value_lookups {
        synth.push("--value-lookups".into());
    }
    if let Some(mix) = recipe.join_mix {
        synth.extend(["--join-mix".into(), mix.map(|w| w.to_string()).join(",")]);
    }
    let (teacher, teacher_task) = teacher_pace(source.teacher.as_deref(), local_teacher_concurrency, rates.teacher_task);
    let flags = TaskFlags { synth, walk, teacher, teacher_task };
    let tasks = write_tasks(&mut stages, &source, &out, &flags, &with_server).await?;
    let source_text = std::fs::read_to_string(&tasks).with_context(|| format!("cannot read {}", tasks.display()))?;
    let kept = limit_splits(&keep.apply(&source_text), train_limit, validation_limit);
    let scenarios = out.join("scenarios.jsonl");
    std::fs::write(&scenarios, &kept)?;
    let n_train = kept.lines().filter(|l| is_train(l)).count();
    let n_val = kept.lines().count() - n_train;
    anyhow::ensure!(n_train > 0, "{} holds no train task after the profile's filter\nhint: see its summary.json for why tasks were dropped", tasks.display());
    grpo.rollout.epochs = epochs_for(grpo.rollout.max_steps, grpo.rollout.scenarios_per_step, n_train);
    let sft_scenarios = out.join("sft-scenarios.jsonl");
    let sft_part = sft_part(&kept, sft_share);
    let n_sft = sft_part.lines().count();
    std::fs::write(&sft_scenarios, sft_part)?;
    eprintln!("tasks: {n_train} train ({n_sft} of them for SFT's reference traces), {n_val} validation");

    let (traces, dataset) = (out.join("traces"), out.join("dataset"));
    let sft_final = sft_dir.join("final");

    // GRPO from the SFT adapter on the whole train split; its validation covers the base, the
    // SFT adapter and the result. Its flags come first: the engine it plays on starts with them
    // (without GRPO too: they size the episodes the validation and the check set play).
    let train_due = !sft_only && !finished(&grpo_dir);
    let validation_due = sft_only && !validation_dir.join("eval.json").exists();
    grpo.init_adapter = Some(path(&std::path::absolute(&sft_final)?));
    let grpo_config = out.join("grpo.toml");
    std::fs::write(&grpo_config, grpo.to_toml())?;
    let mut train_argv = with_server(&["--scenarios".into(), path(&scenarios), "--config".into(), path(&grpo_config), "--out".into(), path(&grpo_dir)]);
    if grpo_dir.join("config.toml").exists() {
        train_argv.push("--resume".into());
    }
    train_argv.extend(["--max-model-len".into(), max_model_len.to_string()]);
    let check_due = check_set.is_some() && !check_dir.join("eval.json").exists();
    let sampled_due = check_set.as_ref().is_some_and(|c| c.samples > 0) && !sampled_dir.join("eval.json").exists();
    let engine_options = if train_due || validation_due || check_due || sampled_due {
        let args: train::Args = parse("train", &train_argv)?;
        Some((PythonEnv::ensure()?, train::engine_options(&args, sft.lora.r, RunSetup::logs(&out)?.join("engine.log"))?))
    } else {
        None
    };

    // Reference traces of the SFT part of the train split (the validation split stays unseen),
    // and the SFT warm start on them: base models of this size make no tool call, so GRPO alone
    // has nothing to learn from (every group scores 0).
    let prepare = async {
        if traces.join(ta_types::trace::TRACES_FILE).exists() {
            stages.skip("collect");
        } else {
            let argv = with_server(&[
                "--scenarios".into(),
                path(&sft_scenarios),
                "--reference".into(),
                "--split".into(),
                "train".into(),
                "--tool-result-max-chars".into(),
                view.clone(),
                "--recovery-share".into(),
                recipe.recovery_share.to_string(),
                // the slips' draw, from the run's seed as SFT's order is
                "--seed".into(),
                sft.seed.to_string(),
                "--out".into(),
                path(&traces),
            ]);
            let (args, t) = stages.start("collect", "reference solutions of part of the train split, checked by ground truth", &argv, Some(5.0 + 0.05 * n_sft as f64))?;
            collect::run(args).await?;
            stages.done(t)?;
        }
        if dataset.join("train.jsonl").exists() {
            stages.skip("curate");
        } else {
            let argv = [path(&traces), "--dedupe".into(), "--no-parquet".into(), "--out".into(), path(&dataset)];
            let (args, t) = stages.start("curate", "keep the successful, distinct traces", &argv, Some(5.0))?;
            unless_interrupted(command, curate::run(args)).await?;
            stages.done(t)?;
        }
        let sft_done = || sft_final.join("adapter_config.json").exists();
        if sft_done() {
            stages.skip("sft");
            return Ok(true);
        }
        sft.dataset = path(&dataset);
        let config = out.join("sft.toml");
        std::fs::write(&config, sft.to_toml())?;
        let mut argv = vec!["--config".into(), path(&config), "--out".into(), path(&sft_dir)];
        if last_complete_step(&sft_dir) > 0 {
            argv.push("--resume".into());
        }
        let estimate = rates.start + rates.sft_trace * (n_sft * sft.epochs as usize) as f64;
        let (args, t) = stages.start("sft", "supervised fine-tuning on the traces (LoRA)", &argv, Some(estimate))?;
        match sft::run(args).await {
            // Said once, as the whole command's (below): its rerun needs no --resume.
            Err(e) if e.is::<Interrupted>() => return Ok(false),
            r => r?,
        }
        if !sft_done() {
            return Ok(false);
        }
        stages.done(t)?;
        Ok(true)
    };
    // A GPU has room for the engine beside SFT; two CPU cores do not.
    let (prepared, started) = match engine_options.clone().filter(|_| gpu) {
        Some((python, options)) => engine::beside(prepare, engine::start(python, options)).await?,
        None => (prepare.await?, None),
    };
    if !prepared {
        return interrupted(command);
    }
    let engine = match (started, engine_options) {
        (Some((engine, took)), _) => {
            stages.engine(took, true)?;
            Some(engine)
        }
        (None, Some((python, options))) => {
            let (engine, took) = unless_interrupted(command, engine::start(python, options)).await?;
            stages.engine(took, false)?;
            Some(engine)
        }
        (None, None) => None,
    };

    // The flags every `eval` here plays its episodes with: GRPO's.
    let episodes = [
        "--max-turns".into(),
        grpo.rollout.max_turns.to_string(),
        "--max-tokens".into(),
        grpo.rollout.max_tokens.to_string(),
        "--max-episode-tokens".into(),
        grpo.rollout.max_episode_tokens.to_string(),
        "--concurrency".into(),
        grpo.rollout.concurrency.to_string(),
        "--tool-result-max-chars".into(),
        view.clone(),
    ];
    if sft_only {
        if validation_due {
            let mut argv =
                with_server(&["--scenarios".into(), path(&scenarios), "--split".into(), "validation".into(), "--model".into(), path(&std::path::absolute(&sft_final)?)]);
            argv.extend(episodes.iter().cloned());
            argv.extend(["--compare-base".into(), "--out".into(), path(&validation_dir)]);
            let (args, t) = stages.start_as(
                VALIDATION_STAGE,
                "eval",
                "the validation split: base and SFT (no GRPO: --steps 0)",
                &argv,
                Some(rates.evaluation(1.0, 2 * n_val, 1.0)),
            )?;
            eval::run(args, engine.as_ref()).await?;
            stages.done(t)?;
        } else {
            stages.skip(VALIDATION_STAGE);
        }
    } else if train_due {
        let validation = rates.evaluation(3.0, n_val, 1.0) + rates.evaluation(2.0, n_val, grpo.rollout.eval_rollouts as f64);
        let estimate = validation + rates.grpo_step * grpo.rollout.max_steps as f64;
        let (args, t) = stages.start("train", "GRPO from the SFT adapter, validating base, SFT and the result", &train_argv, Some(estimate))?;
        let finished_as = train::run(args, engine.as_ref()).await?;
        if !matches!(finished_as, ta_train::run::Finished::Done { .. }) {
            return interrupted(command);
        }
        stages.done(t)?;
    } else {
        stages.skip("train");
    }

    // The check set, which training never saw: base, SFT and SFT+GRPO greedy, then SFT and
    // SFT+GRPO sampled (without GRPO, base and SFT, then SFT). Both play with the flags below,
    // built once when either is due.
    let models = if sft_only { &MODELS[..2] } else { &MODELS[..] };
    if let Some(check) = &check_set {
        let argv = if check_due || sampled_due {
            let file = match &check.scenarios {
                CheckScenarios::File(p) => p.clone(),
                CheckScenarios::Text(text) => {
                    let p = out.join("check-scenarios.jsonl");
                    std::fs::write(&p, text)?;
                    p
                }
            };
            let mut argv = with_server(&[]);
            // The check set's questions name no tools: offer the ones the tasks were trained with.
            if let Some((tools, read_only)) = ta_types::scenario::tools_needed(&ta_types::scenario::parse_scenarios(&kept, &path(&scenarios))?)
                && !chooses_tools
            {
                argv.extend(["--tools".into(), tools.join(",")]);
                if read_only {
                    argv.extend(["--isolate".into(), "none".into()]);
                }
            }
            argv.extend(["--scenarios".into(), path(&file), "--split".into(), "all".into()]);
            if sft_only {
                argv.extend(["--model".into(), path(&std::path::absolute(&sft_final)?)]);
            } else {
                // No step trained (every group flat): GRPO's result is the SFT adapter itself.
                let trained = if grpo_dir.join("final").exists() { grpo_dir.join("final") } else { sft_final.clone() };
                argv.extend(["--model".into(), path(&std::path::absolute(&trained)?), "--baseline".into(), path(&std::path::absolute(&sft_final)?)]);
            }
            argv.extend(episodes);
            argv
        } else {
            Vec::new()
        };
        if check_due {
            let mut greedy = argv.clone();
            greedy.extend(["--compare-base".into(), "--out".into(), path(&check_dir)]);
            // The models play at once, on the engine train used.
            let estimate = rates.evaluation(1.0, models.len() * check.questions, 1.0);
            let what = format!("{} as a check set: {}", check.label, models.join(", "));
            let (args, t) = stages.start("eval", &what, &greedy, Some(estimate))?;
            eval::run(args, engine.as_ref()).await?;
            stages.done(t)?;
        } else {
            stages.skip("eval");
        }
        if sampled_due {
            // `eval --rollouts` samples at temperature 1.0; the seed is GRPO's.
            let mut sampled = argv;
            sampled.extend(["--rollouts".into(), check.samples.to_string(), "--seed".into(), grpo.seed.to_string(), "--out".into(), path(&sampled_dir)]);
            let estimate = rates.evaluation(1.0, (models.len() - 1) * check.questions * check.samples as usize, 1.0);
            let what = format!("the same questions, {} sampled episodes each: {}", check.samples, models[1..].join(", "));
            let (args, t) = stages.start_as(SAMPLED_CHECK_STAGE, "eval", &what, &sampled, Some(estimate))?;
            eval::run(args, engine.as_ref()).await?;
            stages.done(t)?;
        } else if check.samples > 0 {
            stages.skip(SAMPLED_CHECK_STAGE);
        }
    }
    if let Some(engine) = engine {
        engine.shutdown().await;
    }
    let check = check_set.as_ref().map(|c| (check_dir.as_path(), c.label.as_str()));
    if sft_only {
        print_sft_tables(&validation_dir, &sft_final, check, &sampled_dir)?;
    } else {
        print_tables(&grpo_dir, check, &sampled_dir)?;
    }
    print_times(&stages.records, &grpo_dir)?;
    Ok(())
}

/// Where the run's time went: each stage (`fit.json`), and GRPO's by phase (`grpo/phases.jsonl`).
fn print_times(records: &[StageRecord], grpo_dir: &Path) -> Result<()> {
    outln!("\nwall time by stage (fit.json; a stage done in an earlier run shows that run's time):")?;
    for r in records {
        let took = r.seconds.map_or("stopped".to_string(), |s| format!("{s:.0} s"));
        let guess = r.estimate_s.map(|e| format!(" (estimate {e:.0} s)")).unwrap_or_default();
        outln!("  {:<22} {took:>8}{guess}", r.stage)?;
        if r.stage == "train" {
            for p in ta_types::phases::totals(grpo_dir) {
                outln!("    {:<32} {:>6.0} s{}", p.phase, p.seconds, p.times())?;
            }
        }
    }
    Ok(())
}

/// A local teacher's requests as many at once as the profile's engine batches (`--concurrency`),
/// and its measured seconds a task; a teacher behind an API keeps its command's defaults and
/// gets no estimate: its pace is the provider's.
fn teacher_pace(teacher: Option<&str>, concurrency: Option<usize>, per_task: Option<f64>) -> (Vec<String>, Option<f64>) {
    if !teacher.is_some_and(|t| t.starts_with("local/")) {
        return (Vec::new(), None);
    }
    (concurrency.map(|n| vec!["--concurrency".into(), n.to_string()]).unwrap_or_default(), per_task)
}

/// The flags of the task stages, each command's own.
struct TaskFlags {
    synth: Vec<String>,
    walk: Vec<String>,
    /// For `scenarios paraphrase` or `generate`.
    teacher: Vec<String>,
    /// Seconds a task takes the teacher, for the paraphrase's estimate (`None`: not measured
    /// for this teacher on this hardware; an API's pace is the provider's).
    teacher_task: Option<f64>,
}

/// The record of a run's stages (`fit.json`), which marks a directory as a `fit` or `demo` run.
pub const STAGES_FILE: &str = "fit.json";

/// The stages' directories that hold a report, in the order they run: SFT, GRPO (validation of
/// base, SFT and SFT+GRPO) or, without GRPO, the validation of base and SFT, the check set greedy
/// and sampled.
pub const REPORTED: [&str; 5] = ["sft", "grpo", "validation", "check", "check-sampled"];

/// `show` on each stage directory of a `fit` or `demo` run that exists (`report`, `stats`); false
/// when `dir` is not such a run. A stage stopped before its first step has nothing to show (a
/// warning); the others still do, and one at least must. A stdout that cannot be written (`|
/// head` closed it) ends it at once: that is no stage's fault.
pub fn each_stage(dir: &Path, mut show: impl FnMut(&Path) -> Result<()>) -> Result<bool> {
    if !dir.join(STAGES_FILE).exists() {
        return Ok(false);
    }
    let mut shown = 0;
    for stage in REPORTED.iter().map(|d| dir.join(d)).filter(|d| d.is_dir()) {
        match show(&stage) {
            Ok(()) => shown += 1,
            Err(e) if crate::stdout::writing_failed(&e) => return Err(e),
            Err(e) => tracing::warn!("nothing to show for {}: {e}", stage.display()),
        }
    }
    anyhow::ensure!(shown > 0, "{} is a run whose stages wrote nothing to show yet\nhint: run its command again to continue it", dir.display());
    Ok(true)
}

/// Whether `scenarios generate` finished in `dir`: its summary is there and Ctrl-C did not stop
/// it (an interrupted run writes what it played so far, and the same command continues it).
fn generate_finished(dir: &Path) -> bool {
    std::fs::read(dir.join("summary.json")).ok().and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok()).is_some_and(|s| s["interrupted"] == false)
}

/// Runs the task stages the source needs (skipping those complete from an earlier run) and
/// returns the file of tasks to train and validate on.
async fn write_tasks(stages: &mut Stages, source: &TaskSource, out: &Path, flags: &TaskFlags, with_server: &impl Fn(&[String]) -> Vec<String>) -> Result<PathBuf> {
    let (first, dir) = match source.synthesizer {
        Synthesizer::Sql => ("scenarios synth", out.join("synth")),
        Synthesizer::Walk => ("scenarios walk", out.join("walk")),
    };
    if dir.join("summary.json").exists() {
        stages.skip(first);
    } else {
        match source.synthesizer {
            Synthesizer::Sql => {
                let mut rest = flags.synth.clone();
                rest.extend(["--out".into(), path(&dir)]);
                let argv = with_server(&rest);
                let (args, t) = stages.start(first, "tasks with checked answers, written from the server's database", &argv, Some(10.0))?;
                unless_interrupted(stages.command, scenarios::synth::run(args)).await?;
                stages.done(t)?;
            }
            Synthesizer::Walk => {
                let mut rest = flags.walk.clone();
                rest.extend(["--out".into(), path(&dir)]);
                let argv = with_server(&rest);
                let (args, t) = stages.start(first, "tasks about what the server's read-only tools return, checked by replay", &argv, Some(60.0))?;
                unless_interrupted(stages.command, scenarios::walk::run(args)).await?;
                stages.done(t)?;
            }
        }
    }
    let synthesized = dir.join("scenarios.jsonl");
    let Some(teacher) = &source.teacher else { return Ok(synthesized) };
    match source.synthesizer {
        Synthesizer::Sql => {
            let para = out.join("paraphrase");
            if para.join("summary.json").exists() {
                stages.skip("scenarios paraphrase");
            } else {
                let mut rest = vec!["--scenarios".into(), path(&synthesized), "--teacher".into(), teacher.clone(), "--solve".into(), "--out".into(), path(&para)];
                rest.extend(flags.teacher.iter().cloned());
                let argv = with_server(&rest);
                let n_tasks = std::fs::read_to_string(&synthesized).map(|t| t.lines().count()).unwrap_or(0);
                let estimate = flags.teacher_task.map(|s| s * n_tasks as f64);
                let (args, t) = stages.start(
                    "scenarios paraphrase",
                    "other wordings of the tasks by the teacher, kept when they keep the values and its SQL for them gives the task's rows",
                    &argv,
                    estimate,
                )?;
                scenarios::paraphrase::run(args).await?;
                stages.done(t)?;
            }
            Ok(para.join("scenarios.jsonl"))
        }
        Synthesizer::Walk => {
            let generated = out.join("generate");
            if generate_finished(&generated) {
                stages.skip("scenarios generate");
            } else {
                let mut rest = vec!["--teacher".into(), teacher.clone(), "--walk".into(), path(&dir), "--out".into(), path(&generated)];
                rest.extend(flags.teacher.iter().cloned());
                let argv = with_server(&rest);
                let (args, t) = stages.start(
                    "scenarios generate",
                    "tasks written by the teacher from the walk's calls, kept when solvers agree and a fresh server replays their calls",
                    &argv,
                    None,
                )?;
                scenarios::generate::run(args).await?;
                stages.done(t)?;
            }
            // The walk's tasks and the teacher's checked ones.
            let merged = out.join("tasks.jsonl");
            let mut text = std::fs::read_to_string(&synthesized).with_context(|| format!("cannot read {}", synthesized.display()))?;
            let teacher_tasks = ta_types::scenario::load_scenarios(&generated.join("scenarios.jsonl"))?;
            for s in teacher_tasks.iter().filter(|s| s.checked == Some(true) && s.expected.is_some()) {
                text.push_str(&serde_json::to_string(s)?);
                text.push('\n');
            }
            std::fs::write(&merged, text)?;
            Ok(merged)
        }
    }
}

fn is_train(line: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(line).is_ok_and(|v| v["split"] != "validation")
}

/// The scenarios of `text` (JSON lines), keeping the first `train` train and `validation`
/// validation ones.
pub fn limit_splits(text: &str, train: Option<usize>, validation: Option<usize>) -> String {
    let (mut n_train, mut n_val) = (0, 0);
    let mut out = String::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (seen, limit) = if is_train(line) { (&mut n_train, train) } else { (&mut n_val, validation) };
        *seen += 1;
        if limit.is_none_or(|l| *seen <= l) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The first `share` of the train scenarios of `text` (at least one), for SFT.
pub fn sft_part(text: &str, share: f64) -> String {
    let train: Vec<&str> = text.lines().filter(|l| is_train(l)).collect();
    let n = ((share * train.len() as f64).round() as usize).clamp(1.min(train.len()), train.len());
    train[..n].iter().map(|l| format!("{l}\n")).collect()
}

/// Whether the GRPO run in `dir` has finished: its last completed step has been validated (the
/// final validation; the run validates nowhere in between).
fn finished(dir: &Path) -> bool {
    let Ok(run) = RunDir::open(dir) else { return false };
    let last = last_complete_step(dir);
    last > 0 && run.validation_rows().iter().any(|r| r["step"] == last)
}

fn interrupted<T>(command: &str) -> Result<T> {
    Err(Interrupted::stages(command).into())
}

/// The models a run compares, in its tables' order; without GRPO the first two.
const MODELS: [&str; 3] = ["base", "SFT", "SFT+GRPO"];

/// The base / SFT / SFT+GRPO tables: the GRPO run's validations (greedy, and sampled when it
/// sampled), each with the paired test of SFT+GRPO against SFT, and the check set's evaluation.
fn print_tables(grpo_dir: &Path, check: Option<(&Path, &str)>, sampled_dir: &Path) -> Result<()> {
    let labels = MODELS;
    let run = RunDir::open(grpo_dir)?;
    let evaluated = run.evaluated()?;
    // Without a baseline (validate_base off) the columns start at the SFT adapter.
    let shown = &labels[labels.len() - evaluated.len().min(labels.len())..];
    outln!("\nvalidation split, one greedy episode per task:")?;
    print_models(shown, &evaluated)?;
    let sampled = run.evaluated_sampled()?;
    if let [(_, first), ..] = sampled.as_slice() {
        let k = per_task(first);
        outln!("\nvalidation split, {k} episodes per task at the rollout temperature:")?;
        print_models(&labels[1..], &sampled)?;
    }
    // GRPO's final/ is its best validated adapter, not always the last step's (`ta_train::keep`).
    let kept = ta_types::kept::Kept::read(grpo_dir);
    if let Some(k) = &kept {
        outln!("\nthe adapter this run delivers, {}: {}", grpo_dir.join("final").display(), k.summary())?;
    }
    if let Some(check) = check {
        let note = kept
            .as_ref()
            .filter(|k| k.step != k.last_step)
            .map(|k| format!("(SFT+GRPO here is final/, step {}'s adapter; above, the validation's SFT+GRPO is step {}'s)", k.step, k.last_step));
        print_check(check, &labels, note, sampled_dir)?;
    }
    let report = ta_eval::write_report(grpo_dir)?;
    outln!("\nreport: {}", report.display())?;
    Ok(())
}

/// Without GRPO (`--steps 0`): the validation of base and SFT, the adapter the run delivers,
/// and the check set's tables of the two.
fn print_sft_tables(validation_dir: &Path, sft_final: &Path, check: Option<(&Path, &str)>, sampled_dir: &Path) -> Result<()> {
    let labels = &MODELS[..2];
    outln!("\nvalidation split, one greedy episode per task:")?;
    print_models(labels, &RunDir::open(validation_dir)?.evaluated()?)?;
    outln!("\nthe adapter this run delivers, {}: SFT's (no GRPO: --steps 0)", sft_final.display())?;
    if let Some(check) = check {
        print_check(check, labels, None, sampled_dir)?;
    }
    let report = ta_eval::write_report(validation_dir)?;
    outln!("\nreport: {}", report.display())?;
    Ok(())
}

/// The check set's greedy table of `labels` (with `note` above it), and its sampled table of all
/// but the base model when it was played.
fn print_check((dir, label): (&Path, &str), labels: &[&str], note: Option<String>, sampled_dir: &Path) -> Result<()> {
    outln!("\n{label} (a check set training never saw), one greedy episode each:")?;
    if let Some(note) = note {
        outln!("{note}")?;
    }
    print_models(labels, &RunDir::open(dir)?.evaluated()?)?;
    if sampled_dir.join("eval.json").exists() {
        let sampled = RunDir::open(sampled_dir)?.evaluated()?;
        let k = sampled.first().map_or(0, |(_, ts)| per_task(ts));
        outln!("\nthe same questions, {k} sampled episodes each:")?;
        print_models(&labels[1..], &sampled)?;
    }
    Ok(())
}

/// Episodes a task in one model's sampled evaluation.
fn per_task(ts: &[ta_types::Trajectory]) -> usize {
    ts.len() / ts.iter().map(|t| &t.scenario_id).collect::<std::collections::HashSet<_>>().len().max(1)
}

/// The metrics table of `evaluated` under `labels`, and the paired test of the last two.
fn print_models(labels: &[&str], evaluated: &[(String, Vec<ta_types::Trajectory>)]) -> Result<()> {
    let metrics: Vec<Metrics> = evaluated.iter().map(|(_, ts)| Metrics::of(ts)).collect();
    let columns: Vec<(&str, &Metrics)> = labels.iter().copied().zip(&metrics).collect();
    outln!("{}", metrics_table(&columns))?;
    if let (Some((_, _, Comparison { paired: Some(p), .. })), [.., a, b]) = (RunDir::comparison(evaluated), labels) {
        outln!("{}", p.line(a, b))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "{\"task\":\"a\",\"split\":\"train\"}\n{\"task\":\"b\",\"split\":\"validation\"}\n{\"task\":\"c\",\"split\":\"train\"}\n\
                        {\"task\":\"d\",\"split\":\"train\"}\n{\"task\":\"e\",\"split\":\"validation\"}\n{\"task\":\"f\",\"split\":\"train\"}\n";

    fn splits(text: &str) -> (usize, usize) {
        let n_val = text.lines().filter(|l| !is_train(l)).count();
        (text.lines().count() - n_val, n_val)
    }

    /// A generation Ctrl-C stopped is not a finished stage: the rerun continues it.
    #[test]
    fn an_interrupted_generation_is_not_skipped() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!generate_finished(dir.path()), "no summary yet");
        let summary = dir.path().join("summary.json");
        std::fs::write(&summary, r#"{"interrupted": true, "episodes": 12}"#).unwrap();
        assert!(!generate_finished(dir.path()));
        std::fs::write(&summary, r#"{"interrupted": false, "episodes": 40}"#).unwrap();
        assert!(generate_finished(dir.path()));
    }

    #[test]
    fn only_a_local_teacher_is_paced_by_the_profile() {
        let flags = |n: usize| vec!["--concurrency".to_string(), n.to_string()];
        assert_eq!(teacher_pace(Some("local/q.gguf"), Some(128), Some(0.25)), (flags(128), Some(0.25)));
        assert_eq!(teacher_pace(Some("local/q.gguf"), None, None), (Vec::new(), None), "the CPU profile: the command's defaults");
        assert_eq!(teacher_pace(Some("openai/gpt-4o-mini"), Some(128), Some(0.25)), (Vec::new(), None), "an API's pace is the provider's");
        assert_eq!(teacher_pace(None, Some(128), Some(0.25)), (Vec::new(), None));
    }

    #[test]
    fn limits_keep_the_first_scenarios_of_each_split() {
        assert_eq!(splits(&limit_splits(TEXT, None, None)), (4, 2));
        let some = limit_splits(TEXT, Some(3), Some(1));
        assert_eq!(splits(&some), (3, 1));
        assert!(some.starts_with(TEXT.lines().next().unwrap()), "the order is kept");
        assert_eq!(splits(&limit_splits(TEXT, Some(100), Some(0))), (4, 0));
    }

    #[test]
    fn sft_gets_the_first_share_of_the_train_split_only() {
        assert_eq!(splits(&sft_part(TEXT, 1.0)), (4, 0), "no validation task reaches SFT");
        let half = sft_part(TEXT, 0.5);
        assert_eq!(half, "{\"task\":\"a\",\"split\":\"train\"}\n{\"task\":\"c\",\"split\":\"train\"}\n");
        assert_eq!(splits(&sft_part(TEXT, 0.001)), (1, 0), "at least one trace");
        assert_eq!(sft_part("", 0.5), "");
    }
}
