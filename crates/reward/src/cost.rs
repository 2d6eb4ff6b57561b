//! What the judge costs: token usage from each API response, priced per million tokens from a
//! table with defaults for common judge models, overridable in the run config
//! (`[reward.judge.prices]`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Tokens one or more judge calls used, as the API reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, o: Usage) {
        self.input_tokens += o.input_tokens;
        self.output_tokens += o.output_tokens;
    }
}

/// US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
}

impl Price {
    pub fn cost(&self, u: Usage) -> f64 {
        (u.input_tokens as f64 * self.input + u.output_tokens as f64 * self.output) / 1e6
    }
}

/// Public list prices (USD per million input / output tokens) of common judge models, matched
/// by the longest prefix of the model name (so dated snapshots such as `gpt-4o-mini-2024-07-18`
/// find their family).
const DEFAULT_PRICES: &[(&str, f64, f64)] = &[
    ("gpt-4o-mini", 0.15, 0.60),
    ("gpt-4o", 2.50, 10.00),
    ("gpt-4.1-nano", 0.10, 0.40),
    ("gpt-4.1-mini", 0.40, 1.60),
    ("gpt-4.1", 2.00, 8.00),
    ("gpt-5-nano", 0.05, 0.40),
    ("gpt-5-mini", 0.25, 2.00),
    ("gpt-5", 1.25, 10.00),
    ("o4-mini", 1.10, 4.40),
    ("o3-mini", 1.10, 4.40),
    ("o3", 2.00, 8.00),
    ("claude-3-haiku", 0.25, 1.25),
    ("claude-3-5-haiku", 0.80, 4.00),
    ("claude-haiku-4-5", 1.00, 5.00),
    ("claude-3-5-sonnet", 3.00, 15.00),
    ("claude-3-7-sonnet", 3.00, 15.00),
    ("claude-sonnet-4", 3.00, 15.00),
    ("claude-opus-4-5", 5.00, 25.00),
    ("claude-opus-4", 15.00, 75.00),
];

/// The price of `model` (the part after the provider, e.g. `gpt-4o-mini` or OpenRouter's
/// `openai/gpt-4o-mini`): an entry of `overrides` first, then the default table, longest prefix
/// wins. `None` when the model is unknown.
pub fn price_of(model: &str, overrides: &BTreeMap<String, Price>) -> Option<Price> {
    // OpenRouter names carry the vendor: `anthropic/claude-sonnet-4`.
    let bare = model.rsplit('/').next().unwrap_or(model);
    let best = |entries: Vec<(&str, Price)>| {
        entries.into_iter().filter(|(prefix, _)| model.starts_with(prefix) || bare.starts_with(prefix)).max_by_key(|(prefix, _)| prefix.len()).map(|(_, p)| p)
    };
    best(overrides.iter().map(|(k, v)| (k.as_str(), *v)).collect())
        .or_else(|| best(DEFAULT_PRICES.iter().map(|&(k, input, output)| (k, Price { input, output })).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins_and_overrides_come_first() {
        let none = BTreeMap::new();
        assert_eq!(price_of("gpt-4o-mini-2024-07-18", &none), Some(Price { input: 0.15, output: 0.60 }));
        assert_eq!(price_of("gpt-4o-2024-08-06", &none), Some(Price { input: 2.50, output: 10.00 }));
        assert_eq!(price_of("openai/gpt-4.1-mini", &none), Some(Price { input: 0.40, output: 1.60 }));
        assert_eq!(price_of("claude-haiku-4-5-20251001", &none).unwrap().input, 1.00);
        assert_eq!(price_of("my-local-judge", &none), None);
        let mine = BTreeMap::from([("gpt-4o-mini".to_string(), Price { input: 1.0, output: 2.0 })]);
        assert_eq!(price_of("gpt-4o-mini", &mine), Some(Price { input: 1.0, output: 2.0 }));
        let u = Usage { input_tokens: 1_000_000, output_tokens: 500_000 };
        assert!((Price { input: 0.15, output: 0.60 }.cost(u) - 0.45).abs() < 1e-12);
    }
}
