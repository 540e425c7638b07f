//! Analyses over a compiled policy.

pub mod graph;
