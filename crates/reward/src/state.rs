//! State rewards: does the state an episode left (`captured_state`, the output of
//! `--capture-state`) match the scenario's `expected_state`? This tells "created the file" from
//! "said it created the file", which nothing in the transcript can.
//!
//! - matchers (`"Alice"`, `42`, `{"contains": ..}`, `{"regex": ..}`, `{"set": [..]}`, ...): the
//!   ground-truth matchers of [`crate::ground_truth`], applied to the captured state; `set` gives
//!   partial credit;
//! - `{"command": "python3 check.py"}`: the program reads the captured state on stdin; exit 0
//!   scores 1, any other exit 0.
//!
//! The state counts however the episode ended: the work is done or it is not (the rules already
//! reward finishing). An episode without a captured state (the capture failed) or a check that
//! cannot run gets no state part, never a silent zero.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ta_types::ExpectedState;

use crate::ground_truth;

/// Longest a state-check command may run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// The state part in [0, 1], or `None` when it cannot be computed (logged).
pub fn score(expected: &ExpectedState, captured: Option<&str>, scenario_id: &str) -> Option<f64> {
    let Some(state) = captured else {
        tracing::warn!(scenario = scenario_id, "the scenario has expected_state but the episode has no captured state (was --capture-state given, and did it succeed?)");
        return None;
    };
    match expected {
        ExpectedState::Match(e) => Some(ground_truth::matches(e, state)),
        ExpectedState::Command(c) => match run_check(&c.command, state) {
            Ok(passed) => Some(if passed { 1.0 } else { 0.0 }),
            Err(e) => {
                tracing::warn!(scenario = scenario_id, command = %c.command, error = %e, "the expected_state command could not run; no state part");
                None
            }
        },
    }
}

/// Runs `command` with `state` on stdin; whether it exited 0.
fn run_check(command: &str, state: &str) -> Result<bool, String> {
    let argv = shell_words::split(command).map_err(|e| e.to_string())?;
    let (program, args) = argv.split_first().ok_or("empty command")?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start `{program}`: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let body = state.as_bytes().to_vec();
    // A check that does not read its input closes the pipe early: not an error.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&body);
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if started.elapsed() > COMMAND_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("did not finish within {} s", COMMAND_TIMEOUT.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let _ = writer.join();
    Ok(status.success())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ta_types::Expected;
    use ta_types::scenario::{ExpectedRule, StateCommand};

    const STATE: &str = "Alice|admin\nBob|viewer\n";

    #[test]
    fn matchers_check_the_captured_state() {
        let contains = ExpectedState::Match(Expected::Rule(ExpectedRule::Contains("bob|viewer".into())));
        assert_eq!(score(&contains, Some(STATE), "s"), Some(1.0));
        assert_eq!(score(&contains, Some("Alice|admin\n"), "s"), Some(0.0));
        let set = ExpectedState::Match(Expected::Rule(ExpectedRule::Set(vec!["Alice".into(), "Carol".into()])));
        assert_eq!(score(&set, Some(STATE), "s"), Some(0.5));
        assert_eq!(score(&contains, None, "s"), None, "no captured state: no part, not a zero");
    }

    #[test]
    fn commands_read_the_state_on_stdin_and_answer_by_exit_status() {
        let cmd = |c: &str| ExpectedState::Command(StateCommand { command: c.into() });
        assert_eq!(score(&cmd("grep -q Bob"), Some(STATE), "s"), Some(1.0));
        assert_eq!(score(&cmd("grep -q Carol"), Some(STATE), "s"), Some(0.0));
        assert_eq!(score(&cmd("true"), Some(STATE), "s"), Some(1.0), "a check that ignores its input is fine");
        assert_eq!(score(&cmd("no-such-program-xyz"), Some(STATE), "s"), None);
    }
}
