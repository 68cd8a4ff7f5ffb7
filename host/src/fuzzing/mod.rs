//! Entry points for fuzzing: one function per target, each taking arbitrary bytes. A target
//! must never panic, hang or run out of memory on any input: what it calls returns a value
//! or a typed error, and where there is a property to check (a parsed job encodes and
//! parses back to the same job, interpolation is one pass), the target asserts it.
//!
//! The cargo-fuzz crate in `fuzz/` runs them under libFuzzer (`fuzz/README.md`); the
//! `fuzz_smoke` tests run every target over its corpus in `fuzz/corpus/<target>/` and over
//! seeded mutations of it, so every `cargo test` exercises them. Compiled with the
//! `fuzzing` feature (and in tests).

mod api;
mod jobspec;
#[cfg(test)]
mod smoke;
mod state;
mod template;
mod text;

pub use api::api_query;
pub use jobspec::{jobspec_hcl, jobspec_json};
pub use state::{state_file, state_records};
pub use template::template;
pub use text::{agent_config, interpolate, loader_inspect};

/// A fuzz target.
pub type Target = fn(&[u8]);

/// Every target by name (the name of its `fuzz/fuzz_targets/<name>.rs` and its corpus).
pub const TARGETS: &[(&str, Target)] = &[
    ("jobspec_json", jobspec_json),
    ("jobspec_hcl", jobspec_hcl),
    ("interpolate", interpolate),
    ("template", template),
    ("agent_config", agent_config),
    ("state_records", state_records),
    ("state_file", state_file),
    ("loader_inspect", loader_inspect),
    ("api_query", api_query),
];
