//! Asking the teacher for tasks: one reply per batch, each validated against the reply schema
//! and repaired once (the validation error is sent back), otherwise dropped and counted. Every
//! call is priced with the judge's table and counted against the budget.

use std::collections::BTreeMap;
use std::sync::Mutex;

use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};
use ta_chat::{ChatError, HttpLimits};
use ta_reward::cost::{Price, Usage};
use ta_reward::judge::{Endpoint, ProviderError};
use ta_types::Message;

use crate::discover::Surface;
use crate::prompt::{self, Draft, Prompt, SCHEMA_NAME, TemplateError};

#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error(transparent)]
    Template(#[from] TemplateError),
    #[error("the teacher {model} failed: {source}")]
    Call { model: String, source: ChatError },
    /// The prompt and the room asked for the reply do not fit the teacher's context window.
    #[error(
        "the teacher {model} cannot take this prompt: {message}\nhint: lower --teacher-max-tokens (the room kept for its reply), or use a teacher with a longer context"
    )]
    Context { model: String, message: String },
    #[error("the teacher {model} rejected the API key ({status}): {message}\nhint: check the key in the provider's environment variable")]
    Auth { model: String, status: u16, message: String },
    #[error("the server has no tools to write tasks for\nhint: check --server; `train-agent tools --server ...` lists what it offers")]
    NoTools,
}

/// What a model (teacher or solver) has cost so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Spend {
    pub calls: u64,
    pub usage: Usage,
    pub cost_usd: f64,
}

/// A model behind a judge-style endpoint (`openai/…`, `openrouter/…`, `anthropic/…`, `local/…`),
/// priced like the judge.
pub struct Teacher {
    /// As the user named it, e.g. `openai/gpt-4o-mini`.
    pub name: String,
    pub endpoint: Endpoint,
    price: Option<Price>,
    spend: Mutex<Spend>,
}

impl Teacher {
    /// Resolves `spec` (keys from the environment); `base_url` overrides the provider's URL and is
    /// required for `local/`. `prices` override the built-in table.
    pub fn new(spec: &str, base_url: Option<&str>, prices: &BTreeMap<String, Price>, limits: HttpLimits) -> Result<Teacher, ProviderError> {
        let endpoint = Endpoint::resolve(spec, base_url, limits)?;
        let price = endpoint.price(prices);
        if price.is_none() {
            tracing::warn!("no price known for {spec}: its cost is not counted and --budget-usd cannot apply to it");
        }
        Ok(Teacher { name: spec.to_string(), endpoint, price, spend: Mutex::default() })
    }

    /// Whether this model's cost is known (local models cost nothing).
    pub fn priced(&self) -> bool {
        self.price.is_some()
    }

    pub fn spend(&self) -> Spend {
        *self.spend.lock().expect("spend lock")
    }

    /// Counts `calls` calls that used `usage` tokens (the agent loop's calls are counted this way,
    /// from the token usage its trajectories record).
    pub fn account(&self, calls: u64, usage: Usage) {
        let mut s = self.spend.lock().expect("spend lock");
        s.calls += calls;
        s.usage += usage;
        s.cost_usd += self.price.map_or(0.0, |p| p.cost(usage));
    }

    async fn ask(&self, prompt: &Prompt, turns: &[Message], opts: &GenerateOptions, schema: &serde_json::Value) -> Result<String, GenerateError> {
        self.complete(&prompt.system, turns, opts.max_tokens, opts.temperature, SCHEMA_NAME, schema).await
    }

    /// One call with guided JSON output (`schema`, named `schema_name`), priced and counted.
    pub async fn complete(
        &self,
        system: &str,
        turns: &[Message],
        max_tokens: u32,
        temperature: Option<f32>,
        schema_name: &str,
        schema: &serde_json::Value,
    ) -> Result<String, GenerateError> {
        let reply = self.endpoint.call(system, turns, max_tokens, temperature, (schema_name, schema)).await.map_err(|e| match e {
            ChatError::Status { status: status @ (401 | 403), message, .. } => GenerateError::Auth { model: self.name.clone(), status, message },
            ChatError::ContextExceeded(message) => GenerateError::Context { model: self.name.clone(), message },
            source => GenerateError::Call { model: self.name.clone(), source },
        })?;
        self.account(1, reply.usage);
        Ok(reply.text)
    }
}

/// How to ask.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    /// Tasks to generate in all.
    pub n: usize,
    /// Tasks asked for per call.
    pub batch: usize,
    pub max_tokens: u32,
    pub temperature: Option<f32>,
    /// Stop asking once the total spend (teacher so far) reaches this.
    pub budget_usd: Option<f64>,
}

/// What generation produced, counted per stage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct GenerateCounts {
    /// Generation calls (first attempts).
    pub replies: usize,
    /// Tasks the teacher returned: in each batch's last reply (the repair, when one was asked
    /// for) that parsed as a task list, valid or not.
    pub generated: usize,
    /// Tasks accepted, from first replies or repairs.
    pub schema_valid: usize,
    /// Of those, tasks that came from a repair request.
    pub repaired: usize,
    /// Replies that failed validation (then repaired or dropped).
    pub invalid_replies: usize,
    /// Replies still invalid after the repair request, dropped.
    pub dropped_replies: usize,
    /// True when the budget stopped generation early.
    pub budget_reached: bool,
}

/// How many tasks of an earlier reply the repair message shows, so the teacher does not repeat itself.
const AVOID_SHOWN: usize = 30;

/// Asks `teacher` for `opts.n` tasks about `surface`, `opts.batch` per call, with at most three
/// calls per batch's worth of tasks (so a teacher that keeps failing stops).
pub async fn generate(
    teacher: &Teacher,
    template: &str,
    origin: &str,
    surface: &Surface,
    opts: &GenerateOptions,
    progress: &ProgressBar,
) -> Result<(Vec<Draft>, GenerateCounts), GenerateError> {
    if surface.tools.is_empty() {
        return Err(GenerateError::NoTools);
    }
    let schema = prompt::reply_schema(&surface.tool_names());
    let validator = jsonschema::validator_for(&schema).expect("the reply schema is a valid JSON schema");
    let batch = opts.batch.max(1);
    let max_calls = opts.n.div_ceil(batch) * 3;
    let mut drafts: Vec<Draft> = Vec::new();
    let mut counts = GenerateCounts::default();
    progress.set_length(opts.n as u64);
    while drafts.len() < opts.n && counts.replies < max_calls {
        if opts.budget_usd.is_some_and(|b| teacher.spend().cost_usd >= b) {
            counts.budget_reached = true;
            break;
        }
        let want = batch.min(opts.n - drafts.len());
        let avoid: Vec<String> = drafts.iter().rev().take(AVOID_SHOWN).map(|d| d.task.clone()).collect();
        let prompt = prompt::render(template, origin, surface, want, counts.replies, &avoid)?;
        let mut turns = vec![Message::user(prompt.user.clone())];
        counts.replies += 1;
        let text = teacher.ask(&prompt, &turns, opts, &schema).await?;
        let tasks = match prompt::parse_reply(&text, &validator) {
            Ok(tasks) => {
                counts.generated += tasks.len();
                tasks
            }
            Err(why) => {
                counts.invalid_replies += 1;
                tracing::info!("teacher reply invalid ({why}); asking once for a repair");
                turns.push(Message::assistant(text));
                turns.push(Message::user(format!(
                    "Your reply is not valid: {why}. Reply again with only the JSON object {{\"tasks\": [...]}}, each task with \"task\", \"tools\" (names of the server's tools), \"difficulty\" (an integer from 1 to 5) and \"changes_state\" (true or false)."
                )));
                let again = teacher.ask(&prompt, &turns, opts, &schema).await?;
                counts.generated += task_count(&again);
                match prompt::parse_reply(&again, &validator) {
                    Ok(tasks) => {
                        counts.repaired += tasks.len();
                        tasks
                    }
                    Err(why) => {
                        counts.dropped_replies += 1;
                        tracing::warn!("teacher reply still invalid after a repair request, dropped: {why}");
                        continue;
                    }
                }
            }
        };
        counts.schema_valid += tasks.len();
        drafts.extend(tasks);
        progress.set_position(drafts.len().min(opts.n) as u64);
        progress.set_message(format!("${:.4}", teacher.spend().cost_usd));
    }
    drafts.truncate(opts.n);
    Ok((drafts, counts))
}

/// Tasks in a reply that parses as `{"tasks": [...]}`, valid or not; 0 otherwise.
fn task_count(text: &str) -> usize {
    prompt::json_body(text).and_then(|b| serde_json::from_str::<serde_json::Value>(b).ok()).and_then(|v| v["tasks"].as_array().map(Vec::len)).unwrap_or(0)
}
