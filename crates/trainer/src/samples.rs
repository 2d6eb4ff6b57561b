//! Token-level training samples. A multi-turn rollout becomes one sample when each turn's prompt
//! extends the previous turn's prompt + completion (the usual case when the chat template renders
//! earlier turns unchanged); otherwise one sample per turn. Only sampled tokens get loss.

use serde::{Deserialize, Serialize};
use ta_types::Trajectory;

/// One sequence for the trainer. `loss_mask[i]` is 1 when `input_ids[i]` was sampled by the
/// policy; `logprobs[i]` is its sampling logprob (0 elsewhere), or none at all for a loss without a
/// ratio (SFT; the trainer reads an empty list as zeros).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub input_ids: Vec<u32>,
    pub loss_mask: Vec<u8>,
    pub logprobs: Vec<f32>,
    pub advantage: f64,
    pub group_id: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    #[error(
        "trajectory of scenario {scenario} has turn {turn} without token ids\nhint: training needs the engine's tokens: use the embedded engine, or --record-tokens with a vLLM server"
    )]
    MissingTokens { scenario: String, turn: usize },
    #[error("trajectory of scenario {scenario}, turn {turn}: {ids} completion tokens but {logprobs} logprobs")]
    Misaligned { scenario: String, turn: usize, ids: usize, logprobs: usize },
}

/// Builds the samples of one rollout. Turns with no completion tokens add nothing.
pub fn samples_from_trajectory(t: &Trajectory, advantage: f64, group_id: u64) -> Result<Vec<Sample>, SampleError> {
    let mut out: Vec<Sample> = Vec::new();
    let mut current: Option<Sample> = None;
    for (i, turn) in t.turns.iter().enumerate() {
        if turn.prompt_token_ids.is_empty() || (turn.completion_token_ids.is_empty() && turn.completion_tokens > 0) {
            return Err(SampleError::MissingTokens { scenario: t.scenario_id.clone(), turn: i });
        }
        let c = &turn.completion_token_ids;
        if turn.logprobs.len() != c.len() {
            return Err(SampleError::Misaligned { scenario: t.scenario_id.clone(), turn: i, ids: c.len(), logprobs: turn.logprobs.len() });
        }
        let p = &turn.prompt_token_ids;
        let extends = current.as_ref().is_some_and(|s| p.len() >= s.input_ids.len() && p[..s.input_ids.len()] == s.input_ids[..]);
        let sample = match current.take() {
            Some(mut s) if extends => {
                let added = &p[s.input_ids.len()..];
                s.input_ids.extend_from_slice(added);
                s.loss_mask.extend(std::iter::repeat_n(0, added.len()));
                s.logprobs.extend(std::iter::repeat_n(0.0, added.len()));
                s
            }
            previous => {
                out.extend(previous);
                Sample { input_ids: p.clone(), loss_mask: vec![0; p.len()], logprobs: vec![0.0; p.len()], advantage, group_id }
            }
        };
        let mut s = sample;
        s.input_ids.extend_from_slice(c);
        s.loss_mask.extend(std::iter::repeat_n(1, c.len()));
        s.logprobs.extend_from_slice(&turn.logprobs);
        current = Some(s);
    }
    out.extend(current);
    out.retain(|s| s.loss_mask.contains(&1));
    // Prompt tokens after the last sampled token carry no loss: drop them.
    for s in &mut out {
        let end = s.loss_mask.iter().rposition(|&m| m == 1).map_or(0, |i| i + 1);
        s.input_ids.truncate(end);
        s.loss_mask.truncate(end);
        s.logprobs.truncate(end);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ta_types::trajectory::GroupRef;
    use ta_types::{Outcome, Turn};

    fn turn(prompt: &[u32], completion: &[u32]) -> Turn {
        Turn {
            prompt_token_ids: prompt.to_vec(),
            completion_token_ids: completion.to_vec(),
            logprobs: completion.iter().map(|&c| -(c as f32) / 10.0).collect(),
            completion_tokens: completion.len() as u64,
            ..Default::default()
        }
    }

    fn traj(turns: Vec<Turn>) -> Trajectory {
        let mut t = Trajectory::start("s", GroupRef::default(), "m", vec![]);
        t.num_turns = turns.len() as u32;
        t.turns = turns;
        t.outcome = Outcome::Completed;
        t
    }

    #[test]
    fn extending_turns_merge_into_one_sample() {
        let t = traj(vec![turn(&[1, 2], &[3, 4]), turn(&[1, 2, 3, 4, 5, 6], &[7])]);
        let s = samples_from_trajectory(&t, 0.5, 9).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].input_ids, vec![1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(s[0].loss_mask, vec![0, 0, 1, 1, 0, 0, 1]);
        assert_eq!(s[0].logprobs, vec![0.0, 0.0, -0.3, -0.4, 0.0, 0.0, -0.7]);
        assert_eq!((s[0].advantage, s[0].group_id), (0.5, 9));
    }

    #[test]
    fn a_rerendered_prompt_starts_a_new_sample() {
        let t = traj(vec![turn(&[1, 2], &[3, 4]), turn(&[1, 2, 3, 8, 5], &[7]), turn(&[1, 2, 3, 8, 5, 7, 9], &[])]);
        let s = samples_from_trajectory(&t, 1.0, 0).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].input_ids, vec![1, 2, 3, 4]);
        assert_eq!(s[1].input_ids, vec![1, 2, 3, 8, 5, 7]);
        assert_eq!(s[1].loss_mask, vec![0, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn missing_tokens_is_an_error_with_a_hint() {
        let mut t = traj(vec![turn(&[1], &[2])]);
        t.turns[0].prompt_token_ids.clear();
        let e = samples_from_trajectory(&t, 1.0, 0).unwrap_err().to_string();
        assert!(e.contains("without token ids") && e.contains("hint:"), "{e}");
        let mut t = traj(vec![turn(&[1], &[2, 3])]);
        t.turns[0].logprobs.pop();
        assert!(matches!(samples_from_trajectory(&t, 1.0, 0), Err(SampleError::Misaligned { .. })));
    }
}
