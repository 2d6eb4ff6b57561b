//! `train-agent tools`: what the model will be offered.

use anyhow::Result;
use ta_types::terminal::terminal_safe;

use crate::args::ServerArgs;
use crate::server::Server;
use crate::stdout::{out, outln};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    server: ServerArgs,
    /// Print the OpenAI `tools` array (with `complete_task`) instead of a table.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: Args) -> Result<()> {
    let server = Server::connect(&args.server, None).await?;
    let tools = server.tools();
    let specs = ta_rollout::ToolHost::specs(&tools);
    // The server is closed also when printing failed (stdout closed by its reader).
    let printed = print(&server, specs, args.json);
    server.client.close().await;
    printed
}

/// The tools as JSON (`--json`) or the server's line and a table.
fn print(server: &Server, specs: &[ta_types::ToolSpec], json: bool) -> Result<()> {
    if json {
        outln!("{}", serde_json::to_string_pretty(specs)?)?;
    } else {
        let d = &server.discovery;
        // Names, versions and descriptions are the server's words: printed terminal-safe.
        let name = terminal_safe(d.server_name.as_deref().unwrap_or("(unnamed)"));
        outln!("{name} {} — {}", terminal_safe(d.server_version.as_deref().unwrap_or("")), terminal_safe(&server.description))?;
        outln!("{} tools + complete_task, {} resources{}\n", d.tools.len(), d.resources.len(), if d.instructions.is_some() { ", instructions" } else { "" })?;
        out!("{}", render_table(specs))?;
    }
    Ok(())
}

/// One row per tool: name, arguments (`*` marks required ones) and the first line of its
/// description, each made terminal-safe.
pub fn render_table(specs: &[ta_types::ToolSpec]) -> String {
    let rows: Vec<(String, String, String)> = specs
        .iter()
        .map(|t| {
            let params = &t.function.parameters;
            let required: Vec<&str> = params["required"].as_array().map(|r| r.iter().filter_map(|v| v.as_str()).collect()).unwrap_or_default();
            let args: Vec<String> = params["properties"]
                .as_object()
                .map(|p| p.keys().map(|k| if required.contains(&k.as_str()) { format!("{k}*") } else { k.clone() }).collect())
                .unwrap_or_default();
            let desc = t.function.description.as_deref().unwrap_or("").lines().next().unwrap_or("");
            (terminal_safe(&t.function.name).into_owned(), terminal_safe(&args.join(", ")).into_owned(), terminal_safe(desc).into_owned())
        })
        .collect();
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(4).max(4);
    let w1 = rows.iter().map(|r| r.1.len()).max().unwrap_or(9).clamp(9, 40);
    let mut out = format!("{:<w0$}  {:<w1$}  DESCRIPTION\n", "TOOL", "ARGUMENTS");
    for (n, a, d) in rows {
        let d: String = if d.chars().count() > 80 { d.chars().take(77).chain("...".chars()).collect() } else { d };
        out.push_str(&format!("{n:<w0$}  {a:<w1$}  {d}\n"));
    }
    out
}
