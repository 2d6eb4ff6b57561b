//! Custom rewards without touching Rust: an external command (any language) or an HTTP endpoint
//! gets a group's trajectories and answers one score per trajectory. This is how state-changing
//! servers are checked (did the file get written, did the record change) and how Python users
//! bring their own reward code (see `examples/custom_reward.py`).
//!
//! Both receive one JSON object: `{"name": ..., "task": ..., "scenario": {...} | null,
//! "trajectories": [...]}` (trajectories in the run's JSONL format), on stdin for a command or
//! as a POST body for an endpoint, and answer `{"scores": [x1, x2, ...]}` (one finite number per
//! trajectory, in order) on stdout or as the response body.

use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use ta_types::{Scenario, Trajectory};
use tokio::io::AsyncWriteExt;

/// One `[[reward.custom]]` entry of the run config.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CustomReward {
    /// The key under `reward_parts.custom` in trajectories.
    pub name: String,
    /// A command line (split like a shell would, no shell features), e.g. `python3 check.py`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// An HTTP endpoint to POST to instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default = "one")]
    pub weight: f64,
    #[serde(default = "sixty")]
    pub timeout_s: f64,
}

fn one() -> f64 {
    1.0
}

fn sixty() -> f64 {
    60.0
}

#[derive(Debug, thiserror::Error)]
#[error("custom reward `{name}`: {message}\nhint: {hint}")]
pub struct CustomError {
    pub name: String,
    pub message: String,
    pub hint: String,
}

const PROTOCOL_HINT: &str = "it gets {\"task\", \"scenario\", \"trajectories\": [...]} as JSON and must answer {\"scores\": [one number per trajectory, in order]} (see examples/custom_reward.py)";

impl CustomReward {
    /// Checks that exactly one of `command` and `url` is given and the command line parses.
    pub fn validate(&self) -> Result<(), CustomError> {
        let err = |message: &str, hint: &str| Err(self.error(message.to_string(), hint));
        match (&self.command, &self.url) {
            (Some(_), Some(_)) | (None, None) => err("give exactly one of `command` and `url`", "e.g. command = \"python3 examples/custom_reward.py\""),
            (Some(c), None) => match shell_words::split(c) {
                Ok(argv) if !argv.is_empty() => Ok(()),
                Ok(_) => err("`command` is empty", PROTOCOL_HINT),
                Err(e) => err(&format!("cannot parse the command line {c:?}: {e}"), "quote arguments as in a shell"),
            },
            (None, Some(_)) => Ok(()),
        }
    }

    fn error(&self, message: String, hint: &str) -> CustomError {
        CustomError { name: self.name.clone(), message, hint: hint.to_string() }
    }

    /// Scores one group.
    pub async fn score(&self, task: &str, scenario: Option<&Scenario>, group: &[&Trajectory]) -> Result<Vec<f64>, CustomError> {
        self.validate()?;
        let input = json!({"name": self.name, "task": task, "scenario": scenario, "trajectories": group});
        let timeout = Duration::from_secs_f64(self.timeout_s.max(0.001));
        let output = match (&self.command, &self.url) {
            (Some(command), _) => self.run_command(command, &input, timeout).await?,
            (_, Some(url)) => self.post(url, &input, timeout).await?,
            (None, None) => unreachable!("validated"),
        };
        self.parse(&output, group.len())
    }

    async fn run_command(&self, command: &str, input: &Value, timeout: Duration) -> Result<String, CustomError> {
        let argv = shell_words::split(command).expect("validated");
        let mut child = tokio::process::Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| self.error(format!("cannot start `{command}`: {e}"), "check that the program exists and is on PATH"))?;
        let mut stdin = child.stdin.take().expect("piped stdin");
        let body = serde_json::to_vec(input).expect("json");
        let write = async move {
            // A command that does not read its input closes the pipe early: not our error.
            let _ = stdin.write_all(&body).await;
        };
        let run = async {
            let (_, out) = tokio::join!(write, child.wait_with_output());
            out
        };
        let out = tokio::time::timeout(timeout, run)
            .await
            .map_err(|_| self.error(format!("`{command}` did not answer within {:.0} s and was killed", timeout.as_secs_f64()), "make it faster or raise `timeout_s`"))?
            .map_err(|e| self.error(format!("`{command}` failed: {e}"), PROTOCOL_HINT))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let tail: String = stderr.lines().rev().take(10).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
            return Err(self.error(format!("`{command}` exited with {}; its stderr ends with:\n{tail}", out.status), PROTOCOL_HINT));
        }
        String::from_utf8(out.stdout).map_err(|_| self.error(format!("`{command}` wrote output that is not UTF-8"), PROTOCOL_HINT))
    }

    async fn post(&self, url: &str, input: &Value, timeout: Duration) -> Result<String, CustomError> {
        let limits = ta_chat::HttpLimits { max_retries: 2, ..ta_chat::HttpLimits::DEFAULT.with_request(timeout) };
        ta_chat::post_json(&limits.http_client(), url, &[], input, &limits).await.map_err(|e| self.error(e.to_string(), PROTOCOL_HINT))
    }

    fn parse(&self, output: &str, n: usize) -> Result<Vec<f64>, CustomError> {
        #[derive(Deserialize)]
        struct Reply {
            scores: Vec<f64>,
        }
        let shown: String = output.chars().take(300).collect();
        let reply: Reply =
            serde_json::from_str(output.trim()).map_err(|e| self.error(format!("the answer is not {{\"scores\": [numbers]}} ({e}): {shown:?}"), PROTOCOL_HINT))?;
        if reply.scores.len() != n {
            return Err(self.error(format!("{} scores for a group of {n} trajectories", reply.scores.len()), PROTOCOL_HINT));
        }
        if let Some(bad) = reply.scores.iter().find(|s| !s.is_finite()) {
            return Err(self.error(format!("score {bad} is not a finite number"), PROTOCOL_HINT));
        }
        Ok(reply.scores)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ta_types::trajectory::GroupRef;

    fn reward(command: &str) -> CustomReward {
        CustomReward { name: "check".into(), command: Some(command.into()), url: None, weight: 1.0, timeout_s: 5.0 }
    }

    fn group() -> Vec<Trajectory> {
        (0..2).map(|i| Trajectory::start("s", GroupRef { step: 1, index: i }, "m", vec![])).collect()
    }

    #[tokio::test]
    async fn commands_get_the_group_and_answer_scores() {
        let g = group();
        let refs: Vec<&Trajectory> = g.iter().collect();
        // The command sees the trajectories (two of them) and answers one score each.
        let ok = reward(r#"sh -c 'n=$(grep -o "scenario_id" | wc -l); if [ "$n" = 2 ]; then echo "{\"scores\": [0.25, 1]}"; fi'"#);
        assert_eq!(ok.score("t", None, &refs).await.unwrap(), vec![0.25, 1.0]);

        let e = reward("sh -c 'echo boom >&2; exit 3'").score("t", None, &refs).await.unwrap_err().to_string();
        assert!(e.contains("custom reward `check`") && e.contains("boom") && e.contains("hint:"), "{e}");
        let e = reward(r#"sh -c 'cat >/dev/null; echo "{\"scores\": [1]}"'"#).score("t", None, &refs).await.unwrap_err().to_string();
        assert!(e.contains("1 scores for a group of 2"), "{e}");
        let e = reward("sh -c 'echo not json'").score("t", None, &refs).await.unwrap_err().to_string();
        assert!(e.contains("not json"), "{e}");
        let mut slow = reward("sleep 30");
        slow.timeout_s = 0.2;
        assert!(slow.score("t", None, &refs).await.unwrap_err().to_string().contains("did not answer within"));
        let e = reward("no-such-program-xyz").score("t", None, &refs).await.unwrap_err().to_string();
        assert!(e.contains("cannot start"), "{e}");
        let both = CustomReward { url: Some("http://x".into()), ..reward("true") };
        assert!(both.validate().unwrap_err().to_string().contains("exactly one"));
    }

    #[tokio::test]
    async fn commands_see_the_captured_state() {
        let mut g = group();
        g[1].captured_state = Some("customers: Alice, Bob, Carol".into());
        let refs: Vec<&Trajectory> = g.iter().collect();
        let check = reward(r#"sh -c 'if grep -q "\"captured_state\":\"customers: Alice, Bob, Carol\""; then echo "{\"scores\": [0, 1]}"; fi'"#);
        assert_eq!(check.score("t", None, &refs).await.unwrap(), vec![0.0, 1.0]);
    }
}
