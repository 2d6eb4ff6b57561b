//! `train-agent fit` on servers of each kind: the plan it picks (task source, profile, stages)
//! for the demo server, PyPI's `mcp-server-sqlite` and the filesystem server; a user's check set
//! checked before anything runs; and a shortened run end to end on `mcp-server-sqlite` on CPU,
//! where the model is offered only the read tools the tasks need and a second run continues.
//! Not a learning claim: the model is the tiny random Llama (see benches/RESULTS.md for fit on
//! the GPU).

mod common;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use ta_testkit::{MCP_SERVER_SQLITE, SERVER_FILESYSTEM};

fn fit(args: &[&str]) -> Output {
    fit_command(args).output().unwrap()
}

fn fit_command(args: &[&str]) -> Command {
    let mut cmd = Command::new(common::bin());
    cmd.arg("fit").args(args).env("TRAIN_AGENT_PYTHONPATH", Path::new(env!("CARGO_MANIFEST_DIR")).join("python"));
    cmd
}

/// A whole `fit` run with `args`, the base model's validations in `cache`: its stdout and
/// stderr, once it has succeeded.
fn fit_ok(args: &[&str], cache: &Path) -> (String, String) {
    let run = fit_command(args).env(ta_train::base_cache::DIR_ENV, cache).output().unwrap();
    let (stdout, stderr) = text(&run);
    assert!(run.status.success(), "{stdout}\n{stderr}");
    (stdout, stderr)
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// A shop database of 4 customers and 12 orders, as a user's server would hold.
fn shop(path: &Path) {
    let db = rusqlite::Connection::open(path).unwrap();
    db.execute_batch(
        "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL);
         CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id), amount REAL NOT NULL, status TEXT NOT NULL);
         INSERT INTO customers VALUES (1, 'Ada Lovelace', 'London'), (2, 'Grace Hopper', 'New York'), (3, 'Alan Turing', 'London'), (4, 'Edsger Dijkstra', 'Austin');",
    )
    .unwrap();
    for i in 1..=12i64 {
        let status = ["shipped", "pending", "cancelled"][(i % 3) as usize];
        db.execute("INSERT INTO orders VALUES (?1, ?2, ?3, ?4)", rusqlite::params![i, (i % 4) + 1, 10.0 * i as f64, status]).unwrap();
    }
}

fn plan_of(args: &[&str]) -> String {
    let o = fit(&[args, &["--plan"]].concat());
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    stdout
}

#[test]
fn the_plan_follows_the_server_and_the_hardware() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never");
    let out_s = out.to_str().unwrap();
    let demo = plan_of(&["--server", "train-agent demo-server", "--profile", "cpu", "--out", out_s]);
    assert!(demo.contains("tasks:    scenarios synth (the server has a SQL query tool (run_query))"), "{demo}");
    assert!(demo.contains("profile:  cpu (smollm2-135m-instruct)"), "{demo}");
    assert!(demo.contains("stages:   scenarios synth → collect → curate → sft → train\n"), "{demo}");
    assert!(demo.contains("GRPO 2 steps of 3 x 4") && demo.contains("\nGRPO:     about"), "{demo}");
    // --steps 0: no GRPO; the SFT adapter is validated against the base model instead.
    let sft_only = plan_of(&["--server", "train-agent demo-server", "--profile", "cpu", "--steps", "0", "--out", out_s]);
    assert!(sft_only.contains("on 45% of the train split, no GRPO (--steps 0)"), "{sft_only}");
    assert!(sft_only.contains("stages:   scenarios synth → collect → curate → sft → eval validation\n") && !sft_only.contains("GRPO:"), "{sft_only}");
    assert!(!out.exists(), "--plan writes nothing");

    if let Some(sqlite) = MCP_SERVER_SQLITE.path("the_plan_follows_the_server_and_the_hardware") {
        let db = dir.path().join("shop.db");
        shop(&db);
        let server = format!("{} --db-path {}", sqlite.display(), db.display());
        let check = dir.path().join("check.jsonl");
        std::fs::write(&check, "{\"task\": \"How many customers live in London?\", \"expected\": 2}\n").unwrap();
        let p = plan_of(&["--server", &server, "--profile", "gpu", "--teacher", "local/qwen", "--check-set", check.to_str().unwrap(), "--out", out_s]);
        assert!(p.contains("scenarios synth + scenarios paraphrase (the server has a SQL query tool (read_query)); teacher local/qwen"), "{p}");
        assert!(p.contains("tools:    list_tables, describe_table, read_query: the tasks' own, which only read (episodes share one server)"), "{p}");
        assert!(p.contains("profile:  gpu (qwen2.5-coder-0.5b-instruct)") && p.contains("GRPO 48 steps of 8 x 8"), "{p}");
        assert!(p.contains("check set: 1 questions of") && p.contains(", greedy and 4 sampled episodes a question"), "as the GPU samples validation: {p}");
        assert!(p.contains("stages:   scenarios synth → scenarios paraphrase → collect → curate → sft → train → eval → eval sampled"), "{p}");
    }
    if let Some(fs) = SERVER_FILESYSTEM.path("the_plan_follows_the_server_and_the_hardware") {
        let server = format!("{} {}", fs.display(), dir.path().display());
        let p = plan_of(&["--server", &server, "--profile", "cpu", "--out", out_s]);
        assert!(p.contains("tasks:    scenarios walk (the server has no SQL query tool"), "{p}");
        assert!(p.contains("tools:    the read tools the tasks call"), "{p}");
        assert!(p.contains("stages:   scenarios walk → collect"), "{p}");
        let p = plan_of(&["--server", &server, "--profile", "gpu", "--teacher", "local/qwen", "--steps", "4", "--out", out_s]);
        assert!(p.contains("stages:   scenarios walk → scenarios generate → collect") && p.contains("GRPO 4 steps"), "{p}");
    }
    assert!(!out.exists(), "--plan writes nothing");
}

#[test]
fn a_check_set_without_answers_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let check = dir.path().join("check.jsonl");
    std::fs::write(&check, "{\"id\": \"q1\", \"task\": \"How many customers?\", \"expected\": 4}\n{\"id\": \"q2\", \"task\": \"Who ordered most?\"}\n").unwrap();
    let out = dir.path().join("run");
    let o = fit(&["--server", "train-agent demo-server", "--profile", "cpu", "--check-set", check.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let (_, stderr) = text(&o);
    assert!(!o.status.success());
    assert!(stderr.contains("question `q2` has no `expected` answer") && stderr.contains("hint:"), "{stderr}");
    assert!(!out.exists(), "nothing was started");
}

#[test]
fn a_base_model_file_that_is_not_there_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let missing = dir.path().join("models").join("qwen.gguf");
    let o = fit(&["--server", "train-agent demo-server", "--profile", "cpu", "--base-model", missing.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "a usage error: {stdout}\n{stderr}");
    assert!(stderr.contains(&format!("no file or directory {}", missing.display())) && stderr.contains("packaged model"), "{stderr}");
    assert!(!out.exists(), "nothing was started");
}

#[test]
fn sizes_that_cannot_run_are_refused_when_the_flags_are_read() {
    // `--sft-share 0` failed only once the run began, after printing its plan. (`--steps 0`, which
    // meant no limit, a whole epoch of GRPO, now means none: `fit_without_grpo_...` below.)
    for (flag, value, says) in [("--sft-share", "0", "is not a share above 0"), ("--sft-share", "1.5", "is not a share above 0"), ("--steps", "all", "--steps")] {
        let o = fit(&["--server", "train-agent demo-server", "--profile", "cpu", flag, value, "--plan"]);
        let (stdout, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(2), "a usage error: {flag} {value}: {stdout}\n{stderr}");
        assert!(stderr.contains(says) && stdout.is_empty(), "{flag} {value}: {stderr}");
    }
}

#[test]
fn a_judge_or_teacher_the_run_cannot_call_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let run = |flag: &str, model: &str| {
        let o = fit_command(&["--server", "train-agent demo-server", "--profile", "cpu", flag, model, "--out", out.to_str().unwrap()])
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .output()
            .unwrap();
        let (_, stderr) = text(&o);
        assert!(!o.status.success(), "{flag} {model}: {stderr}");
        (o.status.code(), stderr)
    };
    // The run's own engine serves only the base model: another local name would fail at GRPO's
    // first judged step, after synthesis, references and SFT.
    let (_, stderr) = run("--judge-model", "local/qwen-judge");
    assert!(stderr.contains("serves the base model as `local/base` and no model `qwen-judge`") && stderr.contains("hint:"), "{stderr}");
    let (_, stderr) = run("--judge-model", "openai/gpt-4o-mini");
    assert!(stderr.contains("needs $OPENAI_API_KEY, which is not set"), "{stderr}");
    // A teacher without a provider: a usage error when the flag is read; without its key: before
    // synthesis, not when the paraphrase stage first calls it.
    let (code, stderr) = run("--teacher", "gpt-4o-mini");
    assert!(code == Some(2) && stderr.contains("names no model this tool can call") && stderr.contains("hint:"), "{stderr}");
    let (_, stderr) = run("--teacher", "anthropic/claude-haiku-4-5");
    assert!(stderr.contains("--teacher") && stderr.contains("needs $ANTHROPIC_API_KEY, which is not set"), "{stderr}");
    assert!(!out.exists(), "nothing was started");
}

/// `fit.json` of the run in `out`: its stage records, and their names in order.
fn stages_of(out: &Path) -> (Vec<Value>, Vec<String>) {
    let stages: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(out.join("fit.json")).unwrap()).unwrap();
    let names = stages.iter().map(|s| s["stage"].as_str().unwrap().to_string()).collect();
    (stages, names)
}

fn jsonl(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn tool_names(run: &Path) -> Vec<String> {
    let specs: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(run.join("tools.json")).unwrap()).unwrap();
    specs.iter().map(|s| s["function"]["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn fit_on_mcp_server_sqlite_offers_only_read_tools_and_continues_when_run_again() {
    let Some(sqlite) = MCP_SERVER_SQLITE.path("fit_on_mcp_server_sqlite_offers_only_read_tools_and_continues_when_run_again") else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shop.db");
    shop(&db);
    let server = format!("{} --db-path {}", sqlite.display(), db.display());
    let check = dir.path().join("check.jsonl");
    std::fs::write(&check, "{\"task\": \"How many customers live in London?\", \"expected\": 2}\n{\"task\": \"How many orders were cancelled?\", \"expected\": 4}\n")
        .unwrap();
    let out = dir.path().join("fit");
    let model = common::tiny_model(false);
    let args = [
        "--server",
        &server,
        "--profile",
        "cpu",
        "--steps",
        "1",
        "--train-limit",
        "6",
        "--validation-limit",
        "2",
        "--base-model",
        model.to_str().unwrap(),
        "--check-set",
        check.to_str().unwrap(),
        "--check-samples",
        "2",
        "--recovery-share",
        "1",
        "--value-lookups",
        "--join-mix",
        "2,1,0.5",
        "--seed",
        "5",
        "--curriculum",
        "frontier",
        "--out",
        out.to_str().unwrap(),
    ];
    // The base model's validations go to this test's own cache.
    let cache = dir.path().join("validation-cache");
    let (stdout, stderr) = fit_ok(&args, &cache);

    // Each stage is shown with the command that repeats it and an estimate; fit.json keeps what
    // each took.
    for stage in [
        "[1/7] tasks",
        "train-agent scenarios synth",
        "[2/7]",
        "train-agent collect",
        "[4/7]",
        "train-agent sft",
        "[5/7]",
        "train-agent train",
        "[6/7]",
        "train-agent eval",
        "[7/7] the same questions, 2 sampled episodes each",
    ] {
        assert!(stderr.contains(stage), "{stage} missing from:\n{stderr}");
    }
    assert!(stderr.contains("(about "), "an estimate before each stage:\n{stderr}");
    let (stages, names) = stages_of(&out);
    // One engine for train and eval, started once (after SFT on a CPU): its start-up is its own
    // record, and neither stage starts another.
    assert_eq!(names, ["scenarios synth", "collect", "curate", "sft", "engine", "train", "eval", "eval sampled"]);
    // --seed draws the tasks, the slips, SFT's order, GRPO's and the sampled check's episodes
    for stage in [&stages[0], &stages[1], stages.last().unwrap()] {
        assert!(stage["command"].as_str().unwrap().contains("--seed 5"), "{}", stage["command"]);
    }
    for config in ["sft.toml", "grpo.toml"] {
        let text = std::fs::read_to_string(out.join(config)).unwrap();
        assert!(text.lines().any(|l| l == "seed = 5"), "{config}:\n{text}");
    }
    // --curriculum reaches GRPO's config, and its run drew and trained under it
    let grpo_toml = std::fs::read_to_string(out.join("grpo.toml")).unwrap();
    assert!(grpo_toml.lines().any(|l| l == "mode = \"frontier\""), "{grpo_toml}");
    // --value-lookups reaches synth: some tasks look a stored value up before the answer's query
    assert!(stages[0]["command"].as_str().unwrap().contains("--value-lookups"), "{}", stages[0]["command"]);
    let synthesized: Value = serde_json::from_str(&std::fs::read_to_string(out.join("synth/summary.json")).unwrap()).unwrap();
    assert!(synthesized["value_lookups"].as_u64().unwrap() > 0, "{synthesized}");
    // --join-mix reaches synth, which counts its tasks by their joins
    assert!(stages[0]["command"].as_str().unwrap().contains("--join-mix 2,1,0.5"), "{}", stages[0]["command"]);
    assert!(synthesized["per_joins"]["0"].as_u64().unwrap() > 0, "{synthesized}");
    // --recovery-share reaches collect: every SFT trace first writes its query with a slip that
    // this third-party server rejects, shown with weight 0, then the right one.
    assert!(stages[1]["command"].as_str().unwrap().contains("--recovery-share 1"), "{}", stages[1]["command"]);
    let traces = jsonl(&out.join("traces/traces.jsonl"));
    assert!(!traces.is_empty());
    for t in &traces {
        let turns: Vec<&Value> = t["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "assistant").collect();
        let slips: Vec<&&Value> = turns.iter().filter(|m| m["weight"] == 0).collect();
        assert_eq!(slips.len(), 1, "{t}");
        assert_eq!(slips[0]["tool_calls"][0]["function"]["name"], "read_query", "{t}");
        // the server prints its SQL error as plain text, without isError
        let messages = t["messages"].as_array().unwrap();
        let at = messages.iter().position(|m| m["weight"] == 0).unwrap();
        assert!(messages[at + 1]["content"].as_str().unwrap().starts_with("Database error: "), "{}", messages[at + 1]);
    }
    assert!(stages.iter().all(|s| s["seconds"].as_f64().is_some_and(|t| t >= 0.0)));
    assert!(stages.iter().filter(|s| s["stage"] != "engine").all(|s| s["command"].as_str().unwrap().starts_with("train-agent ")));
    assert!(stderr.contains("engine for train and eval: ready after") && stderr.contains("(after SFT)"), "{stderr}");
    assert!(out.join("logs/engine.log").exists() && !out.join("grpo/logs/engine.log").exists() && !out.join("check/logs/engine.log").exists());
    assert!(!out.join("check-sampled/logs/engine.log").exists(), "the sampled check plays on the same engine");

    // The tasks name the read tools they need; every stage that plays episodes offers only those,
    // with no isolation (the synthesizer found read_query only reads), the check set included.
    let tasks = jsonl(&out.join("scenarios.jsonl"));
    assert!(tasks.iter().all(|t| t["tools"] == serde_json::json!(["list_tables", "describe_table", "read_query"]) && t["tools_read_only"] == true), "{tasks:?}");
    for run in ["traces", "grpo", "check", "check-sampled"] {
        let names = tool_names(&out.join(run));
        assert!(names.contains(&"read_query".to_string()), "{run}: {names:?}");
        for writer in ["write_query", "create_table", "append_insight"] {
            assert!(!names.contains(&writer.to_string()), "{run} offered {writer}: {names:?}");
        }
    }
    assert!(stderr.contains("isolation: none (every tool offered only reads"), "{stderr}");
    assert!(!stderr.contains("isolation: episode"), "{stderr}");
    assert!(stderr.contains("--tools list_tables,describe_table,read_query --isolate none"), "the check set's eval gets the same tools:\n{stderr}");

    // Where the time went: GRPO's phases (phases.jsonl), in the report and fit's last table.
    let phases: Vec<String> = jsonl(&out.join("grpo/phases.jsonl")).iter().map(|p| p["phase"].as_str().unwrap().to_string()).collect();
    for phase in ["trainer start-up", "validation of the base model and at step 0", "GRPO rollout", "GRPO score", "GRPO train", "GRPO reload", "validation at step 1"] {
        assert!(phases.iter().any(|p| p == phase), "{phase} missing from {phases:?}");
    }
    assert!(!phases.iter().any(|p| p == "engine start-up"), "train started no engine of its own: {phases:?}");
    assert!(stdout.contains("wall time by stage") && stdout.contains("    GRPO rollout"), "{stdout}");
    let html = std::fs::read_to_string(out.join("grpo/report.html")).unwrap();
    assert!(html.contains("Where the run's time went") && html.contains("Wall time by phase"), "the report shows the phases");

    // The check set: base, SFT and SFT+GRPO on the user's 2 questions, and the tables; then SFT
    // and SFT+GRPO on them twice each, sampled, without the base model.
    assert!(stdout.contains("2 questions of") && stdout.contains("SFT+GRPO"), "{stdout}");
    let sampled = out.join("check-sampled/trajectories");
    for (label, episodes) in [("baseline", 4), ("trained", 4)] {
        assert_eq!(jsonl(&sampled.join(format!("{label}.jsonl"))).len(), episodes, "{label}: 2 questions x 2");
    }
    assert!(!sampled.join("base.jsonl").exists(), "no base model in the sampled check");
    let sampled_table = stdout.split("the same questions, 2 sampled episodes each:").nth(1).expect("the sampled check's table");
    assert!(sampled_table.contains("pass@1") && sampled_table.contains("paired, SFT+GRPO vs SFT"), "{sampled_table}");
    // Which adapter the run delivers: GRPO's final/, as final.json says.
    let kept = ta_types::kept::Kept::read(&out.join("grpo")).expect("grpo/final.json");
    assert!(stdout.contains(&format!("the adapter this run delivers, {}: {}", out.join("grpo/final").display(), kept.summary())), "{stdout}");
    assert!(out.join("grpo/report.html").exists());
    assert!(out.join("sft/report.html").exists(), "sft writes its own report, as train does");
    // `report` on the run's directory writes one report for each stage that has one.
    let report = Command::new(common::bin()).arg("report").arg(&out).output().unwrap();
    let (report_out, report_err) = text(&report);
    assert!(report.status.success(), "{report_err}");
    let written: Vec<&str> = report_out.lines().collect();
    assert_eq!(written, ["sft", "grpo", "check", "check-sampled"].map(|d| out.join(d).join("report.html").display().to_string()), "{report_err}");
    for path in written {
        assert!(std::fs::read_to_string(path).unwrap().contains("<html"), "{path} is a report");
    }

    // Run again: every stage is found complete, the tables are printed again.
    let again = fit(&args);
    let (stdout2, stderr2) = text(&again);
    assert!(again.status.success(), "{stderr2}");
    assert!(!stderr2.contains("[5/7]") && stderr2.contains("train: done in an earlier run"), "finished stages are not run again:\n{stderr2}");
    assert!(stderr2.contains("eval sampled: done in an earlier run"), "{stderr2}");
    assert!(!stderr2.contains("engine for train and eval"), "no engine starts when no stage needs it:\n{stderr2}");
    assert!(stdout2.contains("SFT+GRPO"));
    // Without GRPO into the same directory: refused before anything runs (its tables would call
    // GRPO's check SFT's).
    let mut without = args.to_vec();
    let steps = without.iter().position(|a| *a == "--steps").unwrap();
    without[steps + 1] = "0";
    let refused = fit(&without);
    let (_, stderr_refused) = text(&refused);
    assert!(!refused.status.success() && stderr_refused.contains("holds a run with --steps 1 or more"), "{stderr_refused}");
    assert!(!out.join("validation").exists());

    // Another GRPO run of the same setting into a new directory reuses the base model's
    // validation from the cache; one of another setting plays it again.
    let train = |out: &Path, config: &Path| {
        let scenarios = dir.path().join("fit/scenarios.jsonl");
        let args = ["train", "--server", &server, "--scenarios", out_arg(&scenarios), "--config", out_arg(config), "--max-model-len", "4096", "--out", out_arg(out)];
        let run = Command::new(common::bin())
            .args(args)
            .env(ta_train::base_cache::DIR_ENV, &cache)
            .env("TRAIN_AGENT_PYTHONPATH", Path::new(env!("CARGO_MANIFEST_DIR")).join("python"))
            .output()
            .unwrap();
        let (_, stderr) = text(&run);
        assert!(run.status.success(), "{stderr}");
        stderr
    };
    let same = dir.path().join("same");
    let stderr3 = train(&same, &out.join("grpo.toml"));
    let kept: Vec<_> = std::fs::read_dir(&cache).map(|d| d.flatten().map(|e| e.file_name()).collect()).unwrap_or_default();
    assert!(stderr3.contains("validation of the base model: the same setting's from an earlier run"), "cache {kept:?}\n{stderr3}");
    assert_eq!(std::fs::read(same.join("eval/base.jsonl")).unwrap(), std::fs::read(out.join("grpo/eval/base.jsonl")).unwrap());
    let other_config = dir.path().join("other.toml");
    let toml = std::fs::read_to_string(out.join("grpo.toml")).unwrap();
    assert!(toml.contains("max_turns = 5"), "{toml}");
    std::fs::write(&other_config, toml.replace("max_turns = 5", "max_turns = 4")).unwrap();
    let stderr4 = train(&dir.path().join("other"), &other_config);
    assert!(!stderr4.contains("from an earlier run"), "another setting is validated again:\n{stderr4}");
}

fn out_arg(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Ctrl-C while the engine for train starts, a stage that does not listen for it, after collect
/// and SFT (which do) have run: the run stops there with 130 and says how to continue, every
/// finished stage is kept, and the same command continues from the engine. Before `fit` listened
/// for Ctrl-C once for the whole run, the press was swallowed by the listener collect had left
/// installed, and GRPO ran to its end as if nothing had been pressed.
///
/// The engine's start-up is the cheapest stage that shows it on CPU and that a test can catch
/// (it runs for seconds, the start of its log marks it; curate is over in milliseconds): the SFT
/// before it is the tiny model's few steps.
#[test]
fn ctrl_c_during_a_stage_that_does_not_listen_stops_the_run_and_a_rerun_continues() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fit");
    let model = common::tiny_model(false);
    let args = [
        "--server",
        "train-agent demo-server",
        "--profile",
        "cpu",
        "--steps",
        "1",
        "--train-limit",
        "4",
        "--validation-limit",
        "1",
        "--base-model",
        model.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    let cache = dir.path().join("validation-cache");
    let child = fit_command(&args).env(ta_train::base_cache::DIR_ENV, &cache).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    // The engine's log is created when its process starts, after SFT.
    let engine_log = out.join("logs/engine.log");
    let started = std::time::Instant::now();
    while !engine_log.exists() {
        assert!(started.elapsed() < std::time::Duration::from_secs(900), "no engine start-up in 15 minutes");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(out.join("sft/final/adapter_config.json").exists(), "SFT, which listens for Ctrl-C, ran before");
    Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    let stopped = child.wait_with_output().unwrap();
    let (stdout, stderr) = text(&stopped);
    assert_eq!(stopped.status.code(), Some(130), "{stdout}\n{stderr}");
    assert!(stderr.contains("fit interrupted: every finished stage and step is kept\nhint: run the same command again to continue"), "{stderr}");
    assert!(!stderr.contains("train-agent train "), "no stage starts after Ctrl-C:\n{stderr}");
    let (_, names) = stages_of(&out);
    assert_eq!(names, ["scenarios synth", "collect", "curate", "sft"], "the finished stages, no engine: {stderr}");

    // The same command again: the finished stages are skipped, the engine starts and GRPO runs.
    let (_, stderr2) = fit_ok(&args, &cache);
    for skipped in ["scenarios synth", "collect", "curate", "sft"] {
        assert!(stderr2.contains(&format!("{skipped}: done in an earlier run")), "{skipped} ran again:\n{stderr2}");
    }
    assert!(stderr2.contains("engine for train and eval: ready after") && stderr2.contains("train-agent train "), "{stderr2}");
    let (stages, names) = stages_of(&out);
    assert_eq!(names, ["scenarios synth", "collect", "curate", "sft", "engine", "train"], "{stderr2}");
    assert!(stages.iter().all(|s| s["seconds"].as_f64().is_some()), "every stage finished: {stages:?}");
}

/// `--steps 0` on the demo server, on CPU: no GRPO. The SFT adapter is validated against the base
/// model on the validation split (`eval`, a stage of its own), then played on the check set,
/// greedy with the base model and sampled alone; it is what the run delivers, and the tables show
/// base and SFT only. Run again, every stage is found complete.
#[test]
fn fit_without_grpo_validates_and_checks_the_sft_adapter() {
    let dir = tempfile::tempdir().unwrap();
    let check = dir.path().join("check.jsonl");
    std::fs::write(&check, "{\"task\": \"How many employees are there?\", \"expected\": 50}\n{\"task\": \"How many departments are there?\", \"expected\": 8}\n")
        .unwrap();
    let out = dir.path().join("fit");
    let model = common::tiny_model(false);
    let args = [
        "--server",
        "train-agent demo-server",
        "--profile",
        "cpu",
        "--steps",
        "0",
        "--train-limit",
        "4",
        "--validation-limit",
        "2",
        "--base-model",
        model.to_str().unwrap(),
        "--check-set",
        check.to_str().unwrap(),
        "--check-samples",
        "2",
        "--out",
        out.to_str().unwrap(),
    ];
    let cache = dir.path().join("validation-cache");
    let (stdout, stderr) = fit_ok(&args, &cache);
    for stage in [
        "[4/7]",
        "train-agent sft",
        "[5/7] the validation split: base and SFT (no GRPO: --steps 0)",
        "[6/7]",
        "base, SFT",
        "[7/7] the same questions, 2 sampled episodes each: SFT",
    ] {
        assert!(stderr.contains(stage), "{stage} missing from:\n{stderr}");
    }
    assert!(!stderr.contains("train-agent train "), "no GRPO:\n{stderr}");
    let (_, names) = stages_of(&out);
    assert_eq!(names, ["scenarios synth", "collect", "curate", "sft", "engine", "eval validation", "eval", "eval sampled"]);
    assert!(!out.join("grpo").exists(), "no GRPO run");

    // The validation split, both models on each of its 2 tasks; the check set's 2 questions with
    // base and SFT greedy, then SFT twice each sampled.
    let sft = std::fs::canonicalize(out.join("sft/final")).unwrap();
    for (dir, label, episodes) in
        [("validation", "base", 2), ("validation", "trained", 2), ("check", "base", 2), ("check", "trained", 2), ("check-sampled", "trained", 4)]
    {
        assert_eq!(jsonl(&out.join(dir).join("trajectories").join(format!("{label}.jsonl"))).len(), episodes, "{dir}/{label}");
    }
    for (dir, absent) in [("validation", "baseline"), ("check", "baseline"), ("check-sampled", "base")] {
        assert!(!out.join(dir).join("trajectories").join(format!("{absent}.jsonl")).exists(), "{dir} has no {absent}");
    }
    for dir in ["validation", "check"] {
        let eval: Value = serde_json::from_str(&std::fs::read_to_string(out.join(dir).join("eval.json")).unwrap()).unwrap();
        let played = eval["models"].as_array().unwrap().iter().find(|m| m["label"] == "trained").unwrap()["source"].as_str().unwrap().to_string();
        assert_eq!(std::fs::canonicalize(&played).unwrap(), sft, "{dir} played SFT's adapter");
    }
    let validation = jsonl(&out.join("validation/trajectories/trained.jsonl"));
    let split: Vec<Value> = jsonl(&out.join("scenarios.jsonl")).into_iter().filter(|t| t["split"] == "validation").collect();
    let ids = |ts: &[Value], key: &str| ts.iter().map(|t| t[key].as_str().unwrap().to_string()).collect::<std::collections::BTreeSet<_>>();
    assert_eq!(ids(&validation, "scenario_id"), ids(&split, "id"), "the validation split's tasks");

    // The tables: base and SFT, never SFT+GRPO; the adapter delivered is SFT's.
    assert!(stdout.contains("validation split, one greedy episode per task:") && stdout.contains("2 questions of"), "{stdout}");
    assert!(stdout.contains(&format!("the adapter this run delivers, {}: SFT's (no GRPO: --steps 0)", out.join("sft/final").display())), "{stdout}");
    assert!(stdout.contains("the same questions, 2 sampled episodes each:"), "{stdout}");
    assert!(!stdout.contains("SFT+GRPO"), "{stdout}");
    assert!(out.join("validation/report.html").exists());
    let report = Command::new(common::bin()).arg("report").arg(&out).output().unwrap();
    let (report_out, report_err) = text(&report);
    assert!(report.status.success(), "{report_err}");
    assert_eq!(report_out.lines().collect::<Vec<_>>(), ["sft", "validation", "check", "check-sampled"].map(|d| out.join(d).join("report.html").display().to_string()));

    let (stdout2, stderr2) = fit_ok(&args, &cache);
    for skipped in ["sft", "eval validation", "eval", "eval sampled"] {
        assert!(stderr2.contains(&format!("{skipped}: done in an earlier run")), "{skipped} ran again:\n{stderr2}");
    }
    assert!(!stderr2.contains("engine for train and eval"), "no engine starts when no stage needs it:\n{stderr2}");
    assert!(stdout2.contains("validation split, one greedy episode per task:"), "{stdout2}");

    // GRPO into the same directory would table its adapter beside this run's: refused before
    // anything runs.
    let mut with_grpo = args.to_vec();
    let steps = with_grpo.iter().position(|a| *a == "--steps").unwrap();
    with_grpo[steps + 1] = "1";
    let refused = fit(&with_grpo);
    let (_, stderr3) = text(&refused);
    assert!(!refused.status.success() && stderr3.contains("holds a run with --steps 0") && stderr3.contains("hint: give this run its own --out"), "{stderr3}");
    assert!(!out.join("grpo").exists() && !stderr3.contains("[1/"), "{stderr3}");
}
