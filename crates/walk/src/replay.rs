//! The check: every call a kept task depends on is made again on a fresh server (started the
//! same way, so no state of the walk carries over), and a task is kept only when its operation
//! gives the same answer on the fresh result. Each distinct call is replayed once.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use futures::StreamExt;
use serde_json::Value;
use ta_rollout::ToolHost;

use crate::WalkError;
use crate::ask::Task;
use crate::explore::Walked;
use crate::parse::{Parsed, seen};

/// The [`crate::Summary::dropped`] reasons.
pub const CHAIN_FAILED: &str = "a call of its chain failed on the fresh server";
pub const ANSWER_CHANGED: &str = "its answer differs on the fresh server";

/// The tasks whose answers the replay reproduces, and why the others were dropped.
pub async fn replay<F: ToolHost>(fresh: &F, walked: &Walked, tasks: Vec<Task>, budget: &crate::Budget) -> Result<(Vec<Task>, BTreeMap<String, usize>), WalkError> {
    let needed: BTreeSet<usize> = tasks.iter().flat_map(|t| t.steps(walked)).collect();
    let results: Vec<(usize, Result<ta_rollout::ToolResult, String>)> = futures::stream::iter(needed)
        .map(|id| async move {
            let c = &walked.calls[id];
            (id, fresh.call(&c.tool, Value::Object(c.args.clone())).await)
        })
        .buffered(budget.concurrency.max(1))
        .collect()
        .await;
    let mut replayed: HashMap<usize, Option<Parsed>> = HashMap::new();
    for (id, r) in results {
        let r = r.map_err(WalkError::Connection)?;
        replayed.insert(id, (!r.is_error).then(|| seen(&r.text, budget.view).0));
    }
    let mut kept = Vec::new();
    let mut dropped: BTreeMap<String, usize> = BTreeMap::new();
    for t in tasks {
        if t.steps(walked).iter().any(|id| replayed[id].is_none()) {
            *dropped.entry(CHAIN_FAILED.into()).or_default() += 1;
            continue;
        }
        let results: Vec<&Parsed> = t.answering().iter().filter_map(|id| replayed[id].as_ref()).collect();
        match t.op.answer_all(&results) {
            Some(a) if a == t.expected => kept.push(t),
            _ => *dropped.entry(ANSWER_CHANGED.into()).or_default() += 1,
        }
    }
    Ok((kept, dropped))
}
