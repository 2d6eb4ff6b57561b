//! What the judge sees and what it must answer: the prompt, rendered from a minijinja template
//! (blocks `system` and `user`), and the reply's JSON schema with its validation.
//!
//! A group's trajectories usually share their first messages (system prompt, task): those are
//! shown once as `<context>`, and long tool outputs are cut, so a group of 8 costs little more
//! than one trajectory.

use minijinja::{Environment, context};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use ta_types::{Message, Role, Trajectory};

/// The default prompt: task success first, then honesty (no claims the tools did not support),
/// then tool use, then efficiency.
pub const DEFAULT_TEMPLATE: &str = include_str!("default_prompt.j2");

#[derive(Debug, thiserror::Error)]
#[error(
    "judge prompt template {origin}: {source}\nhint: the template is minijinja with blocks `system` and `user`; variables: task, expected, n, absolute, has_state, context, trajectories (id, transcript, outcome, final_answer, tool_calls, tool_errors, state)"
)]
pub struct TemplateError {
    origin: String,
    source: minijinja::Error,
}

/// The two messages sent to a model: the judge, or the scenario teacher.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prompt {
    pub system: String,
    pub user: String,
}

/// How much of long messages the judge sees.
#[derive(Debug, Clone, Copy)]
pub struct Trim {
    /// Tool results longer than this keep their head and tail.
    pub tool_output_chars: usize,
    /// Any other message longer than this is cut the same way.
    pub message_chars: usize,
}

/// Renders the prompt for `trajectories` (one group, or one trajectory in absolute mode).
/// `expected` is passed to the template as text (the default template does not show it).
pub fn render(template: &str, origin: &str, task: &str, expected: Option<String>, trajectories: &[&Trajectory], trim: Trim) -> Result<Prompt, TemplateError> {
    let err = |source| TemplateError { origin: origin.to_string(), source };
    let prefix = common_prefix(trajectories);
    let context_text = transcript(&trajectories[0].messages[..prefix], trim);
    let items: Vec<Value> = trajectories
        .iter()
        .enumerate()
        .map(|(i, t)| {
            json!({
                "id": (i + 1).to_string(),
                "transcript": transcript(&t.messages[prefix..], trim),
                "outcome": serde_json::to_value(t.outcome).expect("outcome serialises"),
                "final_answer": t.final_answer.as_deref().map(|a| cut(a, trim.message_chars)),
                "tool_calls": t.tool_calls,
                "tool_errors": t.tool_errors,
                "state": t.captured_state.as_deref().map(|s| cut(s.trim(), trim.tool_output_chars)),
            })
        })
        .collect();
    let ctx = context! {
        task => task,
        expected => expected,
        n => trajectories.len(),
        absolute => trajectories.len() == 1,
        has_state => trajectories.iter().any(|t| t.captured_state.is_some()),
        context => context_text,
        trajectories => minijinja::value::Serde(items),
    };
    render_blocks(template, ctx).map_err(err)
}

/// Renders a minijinja template's blocks `system` and `user` (the judge's and the scenario
/// teacher's prompts share this form).
pub fn render_blocks(template: &str, ctx: minijinja::Value) -> Result<Prompt, minijinja::Error> {
    let env = Environment::new();
    let tmpl = env.template_from_str(template)?;
    let mut state = tmpl.render_captured(ctx)?;
    let system = state.with_state_mut(|s| s.render_block("system"))?;
    let user = state.with_state_mut(|s| s.render_block("user"))?;
    Ok(Prompt { system: system.trim().to_string(), user: user.trim().to_string() })
}

/// How many leading messages every trajectory shares; at least the last message of each stays
/// in its own section, so identical trajectories are still shown (and scored) one by one.
fn common_prefix(trajectories: &[&Trajectory]) -> usize {
    if trajectories.len() < 2 {
        return 0;
    }
    let min_len = trajectories.iter().map(|t| t.messages.len()).min().unwrap_or(0);
    let first = &trajectories[0].messages;
    let shared = (0..min_len).take_while(|&i| trajectories.iter().all(|t| t.messages[i] == first[i])).count();
    shared.min(min_len.saturating_sub(1))
}

/// Messages as compact text: `[role] content`, tool calls as `[assistant calls NAME] ARGS`.
fn transcript(messages: &[Message], trim: Trim) -> String {
    let mut lines = Vec::new();
    for m in messages {
        let text = m.content.as_deref().unwrap_or("").trim();
        match m.role {
            Role::Tool => {
                let name = m.name.as_deref().unwrap_or("tool");
                lines.push(format!("[tool result {name}] {}", cut(text, trim.tool_output_chars)));
            }
            role => {
                let role = match role {
                    Role::System => "system",
                    Role::User => "user",
                    _ => "assistant",
                };
                if !text.is_empty() || m.tool_calls.is_empty() {
                    lines.push(format!("[{role}] {}", cut(text, trim.message_chars)));
                }
                for c in &m.tool_calls {
                    lines.push(format!("[{role} calls {}] {}", c.function.name, cut(&c.function.arguments, trim.message_chars)));
                }
            }
        }
    }
    lines.join("\n")
}

/// `text` if short, else its head and tail around a note of how much was cut.
fn cut(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max {
        return text.to_string();
    }
    let head: String = text.chars().take(max * 2 / 3).collect();
    let tail: String = text.chars().skip(n - max / 3).collect();
    format!("{head} …[{} characters cut]… {tail}", n - head.chars().count() - tail.chars().count())
}

/// The reply's JSON schema, sent as `response_format` where the provider supports it. Score
/// ranges are checked in [`parse_reply`] (strict schemas cannot express them everywhere).
pub fn reply_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "scores": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "trajectory_id": {"type": "string"},
                        "explanation": {"type": "string"},
                        "score": {"type": "number"}
                    },
                    "required": ["trajectory_id", "explanation", "score"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["scores"],
        "additionalProperties": false
    })
}

/// One trajectory's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub score: f64,
    pub explanation: String,
}

#[derive(Deserialize)]
struct Reply {
    scores: Vec<ReplyScore>,
}

#[derive(Deserialize)]
struct ReplyScore {
    trajectory_id: Value,
    #[serde(default)]
    explanation: String,
    score: f64,
}

/// Validates the judge's reply against the schema and the group: one score in [0, 1] for each
/// of the `n` trajectory ids. A fenced code block or text around the JSON object is tolerated.
/// The error says what is wrong, so that the repair request can tell the judge.
pub fn parse_reply(text: &str, n: usize) -> Result<Vec<Verdict>, String> {
    let start = text.find('{').ok_or("the reply holds no JSON object")?;
    let end = text.rfind('}').ok_or("the reply holds no complete JSON object")?;
    if end < start {
        return Err("the reply holds no complete JSON object".into());
    }
    let reply: Reply = serde_json::from_str(&text[start..=end]).map_err(|e| format!("the JSON does not match the schema: {e}"))?;
    if reply.scores.len() != n {
        return Err(format!("expected {n} scores (trajectory ids 1 to {n}), got {}", reply.scores.len()));
    }
    let mut out: Vec<Option<Verdict>> = vec![None; n];
    for s in reply.scores {
        let id = match &s.trajectory_id {
            Value::String(x) => x.trim().parse::<usize>().ok(),
            Value::Number(x) => x.as_u64().map(|x| x as usize),
            _ => None,
        };
        let Some(id) = id.filter(|&i| (1..=n).contains(&i)) else {
            return Err(format!("unknown trajectory_id {}: ids are \"1\" to \"{n}\"", s.trajectory_id));
        };
        if !(s.score.is_finite() && (0.0..=1.0).contains(&s.score)) {
            return Err(format!("score {} of trajectory {id} is outside [0, 1]", s.score));
        }
        if out[id - 1].replace(Verdict { score: s.score, explanation: s.explanation.trim().to_string() }).is_some() {
            return Err(format!("trajectory_id {id} is scored twice"));
        }
    }
    Ok(out.into_iter().map(|v| v.expect("n distinct ids in 1..=n")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ta_types::trajectory::GroupRef;
    use ta_types::{Outcome, ToolCall};

    fn group() -> Vec<Trajectory> {
        let prefix = vec![Message::system("You are an agent."), Message::user("How many departments are there?")];
        let call = |id: &str, name: &str, args: &str| Message { tool_calls: vec![ToolCall::new(id, name, args)], content: None, ..Message::assistant("") };
        let mut good = Trajectory::start("dept-count", GroupRef { step: 1, index: 0 }, "base", prefix.clone());
        good.messages.extend([
            call("c1", "run_query", r#"{"sql": "SELECT COUNT(*) FROM departments"}"#),
            Message::tool("c1", "run_query", format!("[{{\"count\": 9}}]\n{}", "-- query plan: seq scan on departments\n".repeat(20))),
            call("c2", "complete_task", r#"{"summary": "9"}"#),
        ]);
        (good.outcome, good.final_answer, good.tool_calls) = (Outcome::Completed, Some("9".into()), 1);
        let mut bad = Trajectory::start("dept-count", GroupRef { step: 1, index: 1 }, "base", prefix);
        bad.messages.push(Message::assistant("There are probably 12 departments."));
        bad.final_answer = Some("There are probably 12 departments.".into());
        vec![good, bad]
    }

    const TRIM: Trim = Trim { tool_output_chars: 200, message_chars: 800 };

    #[test]
    fn default_prompt_for_a_group() {
        let g = group();
        let refs: Vec<&Trajectory> = g.iter().collect();
        let p = render(DEFAULT_TEMPLATE, "default", "How many departments are there?", None, &refs, TRIM).unwrap();
        insta::assert_snapshot!(format!("=== system ===\n{}\n=== user ===\n{}", p.system, p.user));
        assert_eq!(p.user.matches("How many departments are there?").count(), 2, "task line and the shared context, once");
        assert!(p.user.contains("characters cut"), "the long tool output was trimmed");
    }

    #[test]
    fn prompt_with_captured_state() {
        // The agent of attempt 2 only claims the work; the captured state shows who did it.
        let mut g = group();
        g[0].captured_state = Some("departments: 10 rows (Research added)".into());
        g[1].captured_state = Some("departments: 9 rows".into());
        let refs: Vec<&Trajectory> = g.iter().collect();
        let p = render(DEFAULT_TEMPLATE, "default", "Add a Research department.", None, &refs, TRIM).unwrap();
        insta::assert_snapshot!(format!("=== system ===\n{}\n=== user ===\n{}", p.system, p.user));
        assert!(p.user.contains("[state after the attempt]\ndepartments: 9 rows"), "{}", p.user);
        let plain = render(DEFAULT_TEMPLATE, "default", "t", None, &[&group()[0]], TRIM).unwrap();
        assert!(!plain.system.contains("state after") && !plain.user.contains("state after"), "no state, no mention");
    }

    #[test]
    fn absolute_mode_shows_the_whole_trajectory() {
        let g = group();
        let p = render(DEFAULT_TEMPLATE, "default", "How many departments are there?", None, &[&g[1]], TRIM).unwrap();
        assert!(p.system.contains("one attempt"));
        assert!(!p.user.contains("<context>"));
        assert!(p.user.contains("[system] You are an agent."));
    }

    #[test]
    fn identical_trajectories_keep_their_last_message() {
        let g = group();
        let same = [&g[1], &g[1]];
        assert_eq!(common_prefix(&same), g[1].messages.len() - 1);
    }

    #[test]
    fn broken_template_names_its_origin() {
        let g = group();
        let e = render("{% block system %}{{ x | nope }}{% endblock %}", "rubric.j2", "t", None, &[&g[0]], TRIM).unwrap_err().to_string();
        assert!(e.starts_with("judge prompt template rubric.j2:") && e.contains("hint:"), "{e}");
    }

    #[test]
    fn schema_snapshot() {
        insta::assert_json_snapshot!(reply_schema());
    }

    #[test]
    fn replies_are_validated() {
        let ok = r#"```json
{"scores": [{"trajectory_id": "2", "explanation": "guessed", "score": 0.0}, {"trajectory_id": 1, "explanation": "right", "score": 1}]}
```"#;
        let v = parse_reply(ok, 2).unwrap();
        assert_eq!(v[0], Verdict { score: 1.0, explanation: "right".into() });
        assert_eq!(v[1].score, 0.0);
        assert!(parse_reply("no json here", 2).unwrap_err().contains("no JSON object"));
        assert!(parse_reply(r#"{"scores": []}"#, 2).unwrap_err().contains("expected 2 scores"));
        assert!(parse_reply(r#"{"scores": [{"trajectory_id": "1", "explanation": "", "score": 1.5}]}"#, 1).unwrap_err().contains("outside [0, 1]"));
        assert!(parse_reply(r#"{"scores": [{"trajectory_id": "3", "explanation": "", "score": 1}]}"#, 1).unwrap_err().contains("unknown trajectory_id"));
        let twice = r#"{"scores": [{"trajectory_id": "1", "explanation": "", "score": 1}, {"trajectory_id": "1", "explanation": "", "score": 0}]}"#;
        assert!(parse_reply(twice, 2).unwrap_err().contains("twice"));
        assert!(parse_reply(r#"{"score": 1}"#, 1).unwrap_err().contains("schema"));
    }
}
