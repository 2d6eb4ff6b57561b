//! One synthesized question: its SQL (the ground truth, run later through the server), its
//! phrasings, and how its rows become the expected answer.

/// One question (in several phrasings) and the SQL that answers it.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The query shape (`count`, `group_argmax`, `except`, ...): what the summary counts and
    /// the demo's CPU profile selects on.
    pub template: &'static str,
    pub difficulty: u8,
    /// Tables the SQL reads, in the order a person would explore them.
    pub tables: Vec<String>,
    /// Phrasings in people's words.
    pub phrasings: Vec<String>,
    /// A phrasing naming the schema's own tables and columns, for a small share of candidates:
    /// people who know the schema ask like this too, but rarely.
    pub technical: Option<String>,
    pub sql: String,
    /// The number of columns of `sql`'s result: the answer is in the first (or in all, for
    /// [`Shape::Row`]).
    pub width: usize,
    pub answer: Shape,
    pub probe: Option<Probe>,
    /// Queries that list the stored values the question names loosely ("awaiting trial" for
    /// "Awaiting trial outcome"): the reference runs them before `sql`.
    pub lookups: Vec<String>,
}

/// How the rows become the expected answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Exactly one row: its first cell.
    One,
    /// One to [`MAX_LIST`] rows: the set of first cells.
    List,
    /// Exactly one row of two or more cells, all of them the answer ("the total of A and of
    /// B", "the latitude and longitude of X"): the set of its cells.
    Row,
}

/// The largest list a question asks for.
pub const MAX_LIST: usize = 12;

/// A tie check: `sql` yields the ordered rows around the answer (`width` columns, the ordering
/// metric in column `metric`); the answer ends at row `index`, and a row past it with the same metric means a
/// tie. With `exact_rank` ("the second highest"), a tie with the row before it counts too.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    pub sql: String,
    pub width: usize,
    pub metric: usize,
    pub index: usize,
    pub exact_rank: bool,
}

impl Candidate {
    /// Every phrasing, the natural ones first.
    pub fn all_phrasings(&self) -> impl Iterator<Item = &String> {
        self.phrasings.iter().chain(&self.technical)
    }
}
