//! The LLM judge (RULER-style): it sees the task and every trajectory of a group at once and
//! scores each in [0, 1] with a short explanation. Relative scores are what GRPO needs, and
//! comparing attempts side by side is easier for a judge than grading one in isolation
//! (absolute mode, one trajectory per call, is available).
//!
//! Failures never crash a run and never become silent zeros: after the HTTP retries (429, 5xx,
//! timeouts) and one repair request for an invalid reply, the group is skipped, its trajectories
//! keep `reward_parts.judge = None`, and the skip is counted in the metrics. Only a rejected key
//! (401/403) stops the run, since every later call would fail the same way.

pub mod cache;
pub mod prompt;
pub mod provider;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use ta_chat::{ChatError, HttpLimits};
use ta_types::{Message, Trajectory};

use crate::cost::{Price, Usage};
pub use cache::JudgeCache;
pub use prompt::{Prompt, Trim, Verdict};
pub use provider::{Endpoint, Provider, ProviderError};

/// Judge settings (`[reward.judge]` in the run config).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct JudgeConfig {
    /// `openai/<model>`, `openrouter/<vendor>/<model>`, `anthropic/<model>` or `local/<name>`;
    /// empty: no judge.
    pub model: String,
    /// Overrides the provider's API root (required for `local/`).
    pub base_url: Option<String>,
    /// A minijinja template (blocks `system` and `user`) replacing the default rubric.
    pub prompt_file: Option<PathBuf>,
    /// `group` (all rollouts of a scenario in one call) or `absolute` (one call each).
    pub mode: JudgeMode,
    /// Judge calls in flight at once.
    pub concurrency: usize,
    /// HTTP retries on 429/5xx/timeouts, with exponential backoff and jitter.
    pub max_retries: u32,
    pub timeout_s: f64,
    /// Reply token limit (sent to Anthropic and local servers).
    pub max_output_tokens: u32,
    /// Sampling temperature; unset uses the provider's default (reasoning models accept no other).
    pub temperature: Option<f32>,
    pub tool_output_max_chars: usize,
    pub message_max_chars: usize,
    /// Stop training (cleanly, at the step's checkpoint) once the judge has cost this much (USD).
    pub budget_usd: Option<f64>,
    /// USD per million tokens by model-name prefix, e.g. `"gpt-4o-mini" = { input = 0.15, output = 0.6 }`;
    /// entries here win over the built-in table.
    pub prices: BTreeMap<String, Price>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum JudgeMode {
    #[default]
    Group,
    Absolute,
}

impl Default for JudgeConfig {
    fn default() -> Self {
        JudgeConfig {
            model: String::new(),
            base_url: None,
            prompt_file: None,
            mode: JudgeMode::Group,
            concurrency: 4,
            max_retries: 4,
            timeout_s: 120.0,
            max_output_tokens: 2048,
            temperature: None,
            tool_output_max_chars: 1000,
            message_max_chars: 4000,
            budget_usd: None,
            prices: BTreeMap::new(),
        }
    }
}

impl JudgeConfig {
    pub fn enabled(&self) -> bool {
        !self.model.trim().is_empty()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error(transparent)]
    Template(#[from] prompt::TemplateError),
    #[error("cannot read the judge prompt {path}: {source}")]
    PromptFile { path: PathBuf, source: std::io::Error },
    #[error("judge cache {path}: {source}")]
    Cache { path: PathBuf, source: std::io::Error },
    #[error("the judge {model} rejected the API key ({status}): {message}\nhint: check the key in the provider's environment variable")]
    Auth { model: String, status: u16, message: String },
}

/// Cumulative judge accounting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct JudgeStats {
    /// Groups (or single trajectories in absolute mode) sent to the judge or found in the cache.
    pub groups: u64,
    /// Of those, groups left without judge scores (API failures, invalid replies).
    pub skipped: u64,
    pub cache_hits: u64,
    pub calls: u64,
    pub usage: Usage,
    pub cost_usd: f64,
}

impl JudgeStats {
    /// What happened between `before` and `self`.
    pub fn since(&self, before: &JudgeStats) -> JudgeStats {
        JudgeStats {
            groups: self.groups - before.groups,
            skipped: self.skipped - before.skipped,
            cache_hits: self.cache_hits - before.cache_hits,
            calls: self.calls - before.calls,
            usage: Usage { input_tokens: self.usage.input_tokens - before.usage.input_tokens, output_tokens: self.usage.output_tokens - before.usage.output_tokens },
            cost_usd: self.cost_usd - before.cost_usd,
        }
    }
}

/// A ready judge: endpoint, prompt, prices, cache and running totals.
pub struct Judge {
    cfg: JudgeConfig,
    endpoint: Endpoint,
    template: String,
    template_origin: String,
    price: Option<Price>,
    cache: Option<JudgeCache>,
    limit: tokio::sync::Semaphore,
    stats: Mutex<JudgeStats>,
}

impl Judge {
    /// `cache_path`: where verdicts are kept by content hash (a run directory's
    /// `judge-cache.jsonl`), so a resumed run never pays twice for the same group.
    pub fn new(cfg: &JudgeConfig, cache_path: Option<&Path>) -> Result<Judge, JudgeError> {
        let limits = HttpLimits { max_retries: cfg.max_retries, ..HttpLimits::DEFAULT.with_request(Duration::from_secs_f64(cfg.timeout_s.max(0.001))) };
        let endpoint = Endpoint::resolve(&cfg.model, cfg.base_url.as_deref(), limits)?;
        let (template, template_origin) = match &cfg.prompt_file {
            Some(p) => (std::fs::read_to_string(p).map_err(|source| JudgeError::PromptFile { path: p.clone(), source })?, p.display().to_string()),
            None => (prompt::DEFAULT_TEMPLATE.to_string(), "default".to_string()),
        };
        let price = endpoint.price(&cfg.prices);
        if price.is_none() {
            tracing::warn!("no price known for judge model {}: its cost is not counted and --judge-budget cannot apply; add it under [reward.judge.prices]", cfg.model);
        }
        let cache = cache_path.map(|p| JudgeCache::open(p).map_err(|source| JudgeError::Cache { path: p.to_path_buf(), source })).transpose()?;
        Ok(Judge {
            cfg: cfg.clone(),
            endpoint,
            template,
            template_origin,
            price,
            cache,
            limit: tokio::sync::Semaphore::new(cfg.concurrency.max(1)),
            stats: Mutex::default(),
        })
    }

    pub fn config(&self) -> &JudgeConfig {
        &self.cfg
    }

    /// Whether cost is known for this model (local judges cost nothing).
    pub fn priced(&self) -> bool {
        self.price.is_some()
    }

    pub fn stats(&self) -> JudgeStats {
        *self.stats.lock().expect("stats lock")
    }

    /// Adds spending from before a resume, so that totals and the budget cover the whole run.
    pub fn add_prior_cost(&self, usd: f64) {
        self.stats.lock().expect("stats lock").cost_usd += usd;
    }

    pub fn budget_reached(&self) -> bool {
        self.cfg.budget_usd.is_some_and(|b| self.stats().cost_usd >= b)
    }

    /// Renders the prompt for one group (exposed for inspection and tests).
    pub fn prompt(&self, task: &str, expected: Option<String>, group: &[&Trajectory]) -> Result<Prompt, JudgeError> {
        let trim = Trim { tool_output_chars: self.cfg.tool_output_max_chars, message_chars: self.cfg.message_max_chars };
        Ok(prompt::render(&self.template, &self.template_origin, task, expected, group, trim)?)
    }

    /// Scores `group` (one call in group mode, one per trajectory in absolute mode). `Ok(None)`
    /// for each part the judge could not score (counted as skipped); `Err` only for problems no
    /// retry can fix (template, rejected key).
    pub async fn score(&self, task: &str, expected: Option<String>, group: &[&Trajectory]) -> Result<Vec<Option<Verdict>>, JudgeError> {
        match self.cfg.mode {
            JudgeMode::Group => match self.score_one_call(task, expected, group).await? {
                Some(v) => Ok(v.into_iter().map(Some).collect()),
                None => Ok(vec![None; group.len()]),
            },
            JudgeMode::Absolute => {
                let calls = group.iter().map(|t| self.score_one_call(task, expected.clone(), std::slice::from_ref(t)));
                let results = futures::future::join_all(calls).await;
                results.into_iter().map(|r| r.map(|v| v.and_then(|mut v| v.pop()))).collect()
            }
        }
    }

    async fn score_one_call(&self, task: &str, expected: Option<String>, group: &[&Trajectory]) -> Result<Option<Vec<Verdict>>, JudgeError> {
        let prompt = self.prompt(task, expected, group)?;
        let key = JudgeCache::key(&self.cfg.model, &prompt);
        if let Some(hit) = self.cache.as_ref().and_then(|c| c.get(&key)).filter(|v| v.len() == group.len()) {
            let mut s = self.stats.lock().expect("stats lock");
            s.groups += 1;
            s.cache_hits += 1;
            return Ok(Some(hit));
        }
        let _permit = self.limit.acquire().await.expect("semaphore never closed");
        let result = self.ask(&prompt, group.len()).await;
        let mut s = self.stats.lock().expect("stats lock");
        s.groups += 1;
        match result {
            Ok((verdicts, usage)) => {
                drop(s);
                if let Some(cache) = &self.cache
                    && let Err(e) = cache.put(&key, &verdicts, usage)
                {
                    tracing::warn!("cannot write the judge cache: {e}");
                }
                Ok(Some(verdicts))
            }
            Err(Failure::Fatal(e)) => Err(e),
            Err(Failure::Skip(why)) => {
                s.skipped += 1;
                drop(s);
                tracing::warn!(judge = %self.cfg.model, "judge skipped a group of {}: {why}", group.len());
                Ok(None)
            }
        }
    }

    /// One request, plus one repair request when the reply is not valid.
    async fn ask(&self, prompt: &Prompt, n: usize) -> Result<(Vec<Verdict>, Usage), Failure> {
        let mut turns = vec![Message::user(prompt.user.clone())];
        let mut usage = Usage::default();
        for attempt in 0..2 {
            let reply = self
                .endpoint
                .call(&prompt.system, &turns, self.cfg.max_output_tokens, self.cfg.temperature, ("judge_scores", &prompt::reply_schema()))
                .await
                .map_err(|e| self.failure(e))?;
            self.account(reply.usage);
            usage += reply.usage;
            match prompt::parse_reply(&reply.text, n) {
                Ok(v) => return Ok((v, usage)),
                Err(why) if attempt == 0 => {
                    tracing::info!("judge reply invalid ({why}); asking once for a repair");
                    turns.push(Message::assistant(reply.text));
                    turns.push(Message::user(format!(
                        "Your reply is not valid: {why}. Reply again with only the JSON object: {{\"scores\": [...]}} with one entry for each trajectory id from \"1\" to \"{n}\", each score a number from 0 to 1."
                    )));
                }
                Err(why) => return Err(Failure::Skip(format!("invalid reply after a repair request: {why}"))),
            }
        }
        unreachable!("the loop returns on its second attempt")
    }

    fn account(&self, usage: Usage) {
        let mut s = self.stats.lock().expect("stats lock");
        s.calls += 1;
        s.usage += usage;
        s.cost_usd += self.price.map_or(0.0, |p| p.cost(usage));
    }

    fn failure(&self, e: ChatError) -> Failure {
        match e {
            ChatError::Status { status: status @ (401 | 403), message, .. } => Failure::Fatal(JudgeError::Auth { model: self.cfg.model.clone(), status, message }),
            other => Failure::Skip(other.to_string()),
        }
    }
}

enum Failure {
    Fatal(JudgeError),
    Skip(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_counts_spending_from_before_a_resume() {
        let cfg = JudgeConfig { model: "local/base".into(), base_url: Some("http://127.0.0.1:9/v1".into()), budget_usd: Some(1.0), ..Default::default() };
        let judge = Judge::new(&cfg, None).unwrap();
        assert!(judge.priced(), "local judges cost nothing");
        judge.add_prior_cost(0.5);
        assert!(!judge.budget_reached());
        judge.add_prior_cost(0.5);
        assert!(judge.budget_reached(), "reached at exactly the budget");
        let unlimited = Judge::new(&JudgeConfig { budget_usd: None, ..cfg }, None).unwrap();
        unlimited.add_prior_cost(1e9);
        assert!(!unlimited.budget_reached());
    }
}
