//! Paddock's integration tests live in tests/integration/ (one binary). This library holds
//! what they share beyond the harness: [`gotypes`], Go-typed mirrors of Nomad's API
//! answers, which the `gotypes` test decodes every endpoint's answer into; and [`procs`], the
//! reaping of what an agent leaves running, shared with the soak.

pub mod gotypes;
pub mod procs;
