//! The multi-turn agent loop: ask the model, run the tools it calls, feed the results back,
//! until it calls `complete_task` or runs out of turns. Every failure the model can learn from
//! (bad JSON, unknown tool, wrong arguments, a tool error) becomes a message to the model and a
//! count in the trajectory, never a crash.

use std::time::Instant;

use serde_json::Value;
use ta_chat::textcalls::{self, TextCall};
use ta_chat::{ChatClient, ChatError, ChatRequest};
use ta_types::trajectory::GroupRef;
use ta_types::{Message, Outcome, Scenario, ToolCall, Trajectory, Turn};

use crate::tools::ToolHost;

/// Settings of one episode.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub max_turns: u32,
    pub max_tokens: u32,
    /// Tokens the model may write over the whole episode (0: no budget). A model that writes
    /// full turns without finishing (a base model's runaway episode) stops here and fails as one
    /// that ran out of turns, at a fraction of the turns' cost: each turn's prompt holds every
    /// earlier turn, so the last turns are the dearest.
    pub max_episode_tokens: u32,
    pub temperature: f32,
    pub top_p: f32,
    /// Tool results longer than this many characters are cut, with a note to the model.
    pub tool_result_max_chars: usize,
    /// Ask for token ids and logprobs (the engine and vLLM support it; OpenAI does not).
    pub record_tokens: bool,
    pub seed: Option<u64>,
}

impl AgentConfig {
    /// The episode settings every command starts from, written once: `train`'s `[rollout]`
    /// defaults and the sampling flags' of `rollout`, `collect` and `eval` take theirs from here,
    /// changing only what differs for them (a rollout's temperature, a teacher's `max_tokens`).
    pub const DEFAULT: AgentConfig = AgentConfig {
        max_turns: 8,
        max_tokens: 512,
        max_episode_tokens: 2048,
        temperature: 1.0,
        top_p: 1.0,
        // A small project's whole tree, a few dozen commits of a log: questions about a whole
        // workspace or history need the one result that shows it whole (about 3k tokens).
        tool_result_max_chars: 10_000,
        record_tokens: true,
        seed: None,
    };
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig::DEFAULT
    }
}

const NUDGE: &str = "You did not call a tool. Use the tools to make progress, or call `complete_task` with your final answer in `summary`.";

/// Runs one episode of `scenario` and returns its trajectory.
pub async fn run_episode<T: ToolHost>(
    chat: &ChatClient,
    model: &str,
    tools: &T,
    system_prompt: &str,
    scenario: &Scenario,
    group: GroupRef,
    cfg: &AgentConfig,
) -> Trajectory {
    let started = Instant::now();
    let mut ep = Episode::new(system_prompt, scenario, group, model);
    let max_turns = scenario.max_turns.unwrap_or(cfg.max_turns);
    let outcome = loop {
        let over_budget = cfg.max_episode_tokens > 0 && ep.traj.completion_tokens() >= u64::from(cfg.max_episode_tokens);
        if ep.traj.num_turns >= max_turns || over_budget {
            break Outcome::RanOutOfTurns;
        }
        let turn_index = ep.traj.num_turns;
        let request = ChatRequest {
            model: model.to_string(),
            messages: ep.traj.messages.clone(),
            tools: tools.specs().to_vec(),
            n: Some(1),
            temperature: Some(cfg.temperature),
            top_p: Some(cfg.top_p),
            max_tokens: Some(cfg.max_tokens),
            seed: cfg.seed.map(|s| s.wrapping_add(u64::from(turn_index)).wrapping_add(u64::from(group.index) << 16)),
            logprobs: cfg.record_tokens,
            return_token_ids: cfg.record_tokens,
            ..Default::default()
        };
        let t0 = Instant::now();
        let response = chat.complete(&request).await;
        let latency = t0.elapsed();
        ep.traj.timings.model_ms += latency.as_millis() as u64;
        let response = match response {
            Ok(r) => r,
            Err(ChatError::ContextExceeded(m)) => {
                ep.traj.error = Some(m);
                break Outcome::ContextExceeded;
            }
            Err(e) => {
                ep.traj.error = Some(e.to_string());
                break Outcome::Error;
            }
        };
        let Some(choice) = response.choices.into_iter().next() else {
            ep.traj.error = Some("the model server returned no choices".into());
            break Outcome::Error;
        };
        let usage = response.usage.unwrap_or_default();
        ep.traj.turns.push(Turn {
            logprobs: choice.token_logprobs(),
            completion_token_ids: choice.token_ids.clone().unwrap_or_default(),
            prompt_token_ids: response.prompt_token_ids.unwrap_or_default(),
            finish_reason: choice.finish_reason.clone(),
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            latency_ms: latency.as_millis() as u64,
        });
        ep.traj.num_turns += 1;
        if let Some(outcome) = ep.act(choice.message, turn_index, tools, cfg).await {
            break outcome;
        }
    };
    ep.traj.outcome = outcome;
    ep.traj.timings.total_ms = started.elapsed().as_millis() as u64;
    ep.traj
}

struct Episode {
    traj: Trajectory,
    /// Failed calls not yet followed by a successful one.
    pending_failures: u32,
    /// The texts of the errors the server returned, which an answer must not merely repeat.
    server_errors: Vec<String>,
}

/// How many consecutive characters of a server error's first line an answer must hold to count as
/// repeating it: enough to name the fault ("SQL error: no such column: d.terminated"), and no
/// error shorter than [`MIN_ERROR_CHARS`] counts, so a short common phrase in a real answer
/// never does.
const ERROR_WINDOW_CHARS: usize = 40;
const MIN_ERROR_CHARS: usize = 12;

/// Whether `answer` repeats one of `errors`: holds [`ERROR_WINDOW_CHARS`] consecutive characters
/// of one's first line, wherever they start (the whole line when it is shorter). Not only its
/// head: GRPO taught an adapter to hand in an error's tail, its head dropped, which a check of the
/// head alone let through (benches/RESULTS.md, "Run 30").
fn repeats_error(answer: &str, errors: &[String]) -> bool {
    errors.iter().any(|e| {
        let line: Vec<char> = e.trim().lines().next().unwrap_or("").chars().collect();
        line.len() >= MIN_ERROR_CHARS && line.windows(ERROR_WINDOW_CHARS.min(line.len())).any(|w| answer.contains(&w.iter().collect::<String>()))
    })
}

impl Episode {
    fn new(system_prompt: &str, scenario: &Scenario, group: GroupRef, model: &str) -> Self {
        let messages = vec![Message::system(system_prompt), Message::user(&scenario.task)];
        let traj = Trajectory::start(&scenario.id, group, model, messages);
        Episode { traj, pending_failures: 0, server_errors: Vec::new() }
    }

    /// Handles one assistant message; returns the outcome when the episode ends.
    async fn act<T: ToolHost>(&mut self, mut msg: Message, turn: u32, tools: &T, cfg: &AgentConfig) -> Option<Outcome> {
        let mut malformed = Vec::new();
        if msg.tool_calls.is_empty()
            && let Some(content) = msg.content.clone()
        {
            let parsed = textcalls::parse(&content, &format!("call_t{turn}_"));
            if !parsed.calls.is_empty() {
                msg.content = (!parsed.rest.is_empty()).then_some(parsed.rest);
                for (i, c) in parsed.calls.into_iter().enumerate() {
                    match c {
                        TextCall::Call(call) => msg.tool_calls.push(call),
                        TextCall::Malformed { raw, reason } => malformed.push((format!("call_t{turn}_bad{i}"), raw, reason)),
                    }
                }
            }
        }
        let calls = msg.tool_calls.clone();
        let text = msg.content.clone();
        self.traj.messages.push(msg);

        for (id, raw, reason) in malformed {
            self.fail(true);
            self.traj.messages.push(Message::tool(
                id,
                "invalid_tool_call",
                format!("Error: could not read the tool call `{raw}`: {reason}. Write calls as <tool_call>{{\"name\": ..., \"arguments\": {{...}}}}</tool_call>."),
            ));
        }
        if calls.is_empty() {
            if let Some(t) = text.filter(|t| !t.trim().is_empty()) {
                self.traj.final_answer = Some(t);
            }
            self.traj.messages.push(Message::user(NUDGE));
            return None;
        }
        for call in calls {
            if let Some(outcome) = self.execute(&call, tools, cfg).await {
                return Some(outcome);
            }
        }
        None
    }

    /// Runs one call; returns the outcome when it ends the episode.
    async fn execute<T: ToolHost>(&mut self, call: &ToolCall, tools: &T, cfg: &AgentConfig) -> Option<Outcome> {
        let name = call.function.name.as_str();
        let is_complete = name == ta_mcp::COMPLETE_TASK;
        if !is_complete {
            self.traj.tool_calls += 1;
        }
        let args: Value = match serde_json::from_str(if call.function.arguments.trim().is_empty() { "{}" } else { &call.function.arguments }) {
            Ok(v) => v,
            Err(e) => {
                self.fail(true);
                self.reply(call, format!("Error: the arguments of `{name}` are not valid JSON ({e}). Send a JSON object."));
                return None;
            }
        };
        if let Err(problem) = tools.check(name, &args) {
            self.fail(true);
            self.reply(call, format!("Error: {problem}"));
            return None;
        }
        if is_complete {
            self.traj.final_answer = args.get("summary").and_then(Value::as_str).map(str::to_string);
            self.traj.answered_with_error = self.traj.final_answer.as_deref().is_some_and(|a| repeats_error(a, &self.server_errors));
            return Some(Outcome::Completed);
        }
        let t0 = Instant::now();
        let result = tools.call(name, args).await;
        self.traj.timings.tools_ms += t0.elapsed().as_millis() as u64;
        match result {
            Ok(r) => {
                if r.is_error {
                    self.fail(false);
                    self.server_errors.push(r.text.clone());
                } else {
                    self.traj.recovered_errors += self.pending_failures;
                    self.pending_failures = 0;
                }
                let text = truncate(&r.text, cfg.tool_result_max_chars);
                self.reply(call, if r.is_error { format!("Error: {text}") } else { text });
                None
            }
            Err(e) => {
                self.traj.tool_errors += 1;
                self.traj.error = Some(format!("MCP server failed during `{name}`: {e}"));
                Some(Outcome::Error)
            }
        }
    }

    fn fail(&mut self, malformed: bool) {
        self.traj.tool_errors += 1;
        self.traj.malformed_calls += u32::from(malformed);
        self.pending_failures += 1;
    }

    fn reply(&mut self, call: &ToolCall, text: String) {
        self.traj.messages.push(Message::tool(&call.id, &call.function.name, text));
    }
}

/// Cuts `text` to `max` characters (on a char boundary) and says so.
pub fn truncate(text: &str, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max).collect();
    format!("{cut}\n[truncated: showing the first {max} of {total} characters]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_repeats_an_error_by_any_long_enough_part_of_it() {
        let errors = vec!["SQL error: no such column: d.terminated in SELECT d.name FROM departments d".to_string(), "not found".to_string()];
        assert!(repeats_error("SQL error: no such column: d.terminated in SELECT d.name, count(*)", &errors), "the first 40 characters and more");
        assert!(repeats_error("d.terminated in SELECT d.name FROM departments d", &errors), "its tail, the head dropped");
        assert!(!repeats_error("SQL error: no such column", &errors), "fewer than 40 of its characters");
        assert!(!repeats_error("d.terminated", &errors), "a name it mentions");
        assert!(!repeats_error("Engineering has 55 current employees", &errors));
        assert!(!repeats_error("the file was not found in the archive", &errors), "an error shorter than 12 characters never counts");
        assert!(repeats_error("Error: no such table: x (see list_tables)", &["no such table: x (see list_tables)".to_string()]), "a short error whole");
        assert!(!repeats_error("anything", &[]));
    }

    #[test]
    fn truncation_keeps_short_text_and_notes_cuts() {
        assert_eq!(truncate("héllo", 5), "héllo");
        assert_eq!(truncate("héllo world", 5), "héllo\n[truncated: showing the first 5 of 11 characters]");
    }
}
