//! `train-agent scenarios synth`: SQL question/answer scenarios written offline (no model)
//! through a server's SQL query tool, every answer checked by running its SQL there. The logic
//! lives in `ta_synth`; this parses flags, connects and writes the files.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use ta_synth::{SynthOptions, synthesize};

use crate::args::ServerArgs;
use crate::stdout::outln;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    server: ServerArgs,
    /// Scenarios to write (at most; fewer when the database offers fewer distinct questions).
    #[arg(long, default_value_t = 2000, value_parser = crate::args::at_least_one)]
    n: usize,
    /// Output directory: scenarios.jsonl, summary.json and schema.json (what was learnt).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// The server's SQL query tool, when detection from the schemas picks the wrong one or none.
    #[arg(long, value_name = "NAME")]
    query_tool: Option<String>,
    #[command(flatten)]
    split: super::SplitArgs,
    /// Queries in flight at once.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Only questions of these templates (comma-separated or repeated; `summary.json` and the
    /// scenarios' `template` name them), chosen before any query runs.
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    templates: Option<Vec<String>>,
    /// Only questions up to this difficulty level (1-5: the target's, one per condition, one per join).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=5))]
    max_difficulty: Option<u8>,
    /// A JSON object of template weights (`{"lookup": 0.8, "count_rows": 0.05}`): templates are
    /// drawn in proportion, one not named at their mean (1 if all are 0), one of weight 0 not at all.
    /// `scenarios frontier --weights` writes them from a model's failed episodes.
    #[arg(long, value_name = "FILE")]
    template_weights: Option<PathBuf>,
    /// Also name text values loosely, as people who do not know how they are stored do
    /// ("awaiting trial" for "Awaiting trial outcome", "engineering" for "Engineering", "on leave"
    /// for "on_leave"), and a state by its value alone ("projects currently on hold"), and list
    /// the column's stored values in the reference before the answer's query.
    #[arg(long)]
    value_lookups: bool,
    /// How often, within each template, to draw questions whose SQL joins no table, one, and two
    /// or more, relative to each other (e.g. 4,2,1; a weight of 0: none). Default: as the
    /// grammar offers them, more joined than people ask (benches/RESULTS.md, "Run 33").
    #[arg(long, value_name = "W0,W1,W2", value_parser = crate::args::join_mix)]
    join_mix: Option<[f64; 3]>,
}

pub async fn run(args: Args) -> Result<()> {
    args.split.check()?;
    let started = Instant::now();
    let _lock = ta_eval::rundir::RunLock::acquire(&args.out)?;
    let logs = args.out.join("logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("cannot create {}", logs.display()))?;
    let server = crate::server::Server::connect(&args.server, Some(&logs)).await?;
    let tools = server.tools();
    let opts = SynthOptions {
        n: args.n,
        query_tool: args.query_tool.clone(),
        validation_fraction: args.split.validation_fraction,
        seed: args.split.seed,
        concurrency: args.concurrency,
        templates: args.templates.clone(),
        max_difficulty: args.max_difficulty,
        template_weights: args.template_weights.as_deref().map(read_weights).transpose()?,
        value_lookups: args.value_lookups,
        join_mix: args.join_mix,
    };
    eprintln!("synthesizing up to {} scenarios through {} ...", args.n, server.description);
    let result = synthesize(&tools, &opts).await;
    server.client.close().await;
    let out = result?;

    let path = args.out.join("scenarios.jsonl");
    super::write_jsonl(&path, &out.scenarios)?;
    std::fs::write(args.out.join("summary.json"), serde_json::to_vec_pretty(&out.summary)?)?;
    std::fs::write(args.out.join("schema.json"), serde_json::to_vec_pretty(&out.schema)?)?;

    let s = &out.summary;
    // Tool and table names come from the server.
    let safe = |t: &str| ta_types::terminal::terminal_safe(t).into_owned();
    outln!(
        "query tool        {} (list: {}, describe: {})",
        safe(&s.query_tool),
        safe(s.list_tool.as_deref().unwrap_or("-")),
        safe(s.describe_tool.as_deref().unwrap_or("-"))
    )?;
    outln!("tables            {}", safe(&s.tables.join(", ")))?;
    outln!("candidates        {} questions, {} run through the server", s.candidates, s.checked)?;
    for (reason, n) in &s.dropped {
        outln!("  dropped {n:>5}   {reason}")?;
    }
    if s.duplicates > 0 {
        outln!("  duplicates {:>3}  (same normalized text)", s.duplicates)?;
    }
    outln!("scenarios         {} (train {}, validation {})", s.scenarios, s.train, s.validation)?;
    if args.value_lookups {
        outln!("value lookups     {} (a value named loosely, looked up in the reference)", s.value_lookups)?;
    }
    super::print_counts("per template", s.per_template.iter().map(|(k, n)| (k.clone(), n)))?;
    super::print_counts("per difficulty", s.per_difficulty.iter().map(|(k, n)| (format!("level {k}"), n)))?;
    super::print_counts("per table", s.per_table.iter().map(|(k, n)| (k.clone(), n)))?;
    super::print_counts("per joins", s.per_joins.iter().map(|(k, n)| (format!("{k} joined"), n)))?;
    outln!("time              {:.1} s", started.elapsed().as_secs_f64())?;
    outln!("scenarios: {}", path.display())?;
    if s.scenarios < args.n {
        match s.dropped.get(ta_synth::QUERY_FAILED) {
            Some(failed) => eprintln!(
                "note: {} of the {} scenarios asked for; {failed} candidate queries failed on the server (the first failure is logged above; --log ta_synth=debug shows every one)",
                s.scenarios, args.n
            ),
            None => eprintln!("note: {} of the {} scenarios asked for; the database offers no more distinct checked questions", s.scenarios, args.n),
        }
    }
    Ok(())
}

/// Template weights from a JSON object of non-negative numbers.
fn read_weights(path: &std::path::Path) -> Result<std::collections::BTreeMap<String, f64>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read --template-weights {}", path.display()))?;
    let weights: std::collections::BTreeMap<String, f64> = serde_json::from_str(&text)
        .with_context(|| format!("--template-weights {} is not a JSON object of numbers\nhint: {{\"lookup\": 0.8, \"count_rows\": 0.05}}", path.display()))?;
    if let Some((t, w)) = weights.iter().find(|(_, w)| !w.is_finite() || **w < 0.0) {
        anyhow::bail!("--template-weights {}: {t} has the weight {w}; weights are numbers of 0 or more", path.display());
    }
    Ok(weights)
}
