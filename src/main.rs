//! `train-agent`: the command-line edge. It parses flags and wires the crates together.

fn main() {}
