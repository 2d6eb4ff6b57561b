//! One episode to play. Its own module because both the runner, which plays jobs, and the tool
//! hosts, which set up each job's world (`ToolHost::begin`), need it.

use ta_types::Scenario;
use ta_types::trajectory::GroupRef;

/// One episode to play: a scenario and its place in a group.
#[derive(Debug, Clone)]
pub struct Job {
    pub scenario: Scenario,
    pub group: GroupRef,
}
