//! Targets over job files: Nomad API JSON and HCL with variables.

use std::collections::BTreeMap;

use crate::jobspec::{Job, parse_job_hcl_with_vars, parse_job_json, parse_register_request};

/// A parsed job, encoded as the API shows it, parses back to the same job.
fn round_trips(job: &Job, from: &str) {
    let encoded = serde_json::to_vec(job).expect("a job always encodes");
    let again = match parse_job_json(&encoded) {
        Ok(j) => j,
        Err(e) => panic!(
            "a job parsed from {from} does not parse back from its own JSON: {e}\n{}",
            String::from_utf8_lossy(&encoded)
        ),
    };
    assert!(
        again.spec_eq(job),
        "a job parsed from {from} changes through its own JSON:\n{job:#?}\n{again:#?}"
    );
}

/// Input: a job file in JSON (`{"Job": {...}}` or the bare job), also read as a register
/// request body.
pub fn jobspec_json(data: &[u8]) {
    if let Ok(job) = parse_job_json(data) {
        round_trips(&job, "JSON");
    }
    if let Ok(req) = parse_register_request(data) {
        round_trips(&req.job, "a register request");
    }
}

/// Input: a job file in HCL; lines `#var NAME=VALUE` (comments to HCL) give `-var` values.
pub fn jobspec_hcl(data: &[u8]) {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let vars: BTreeMap<String, String> = src
        .lines()
        .filter_map(|l| l.strip_prefix("#var "))
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if let Ok(job) = parse_job_hcl_with_vars(src, &vars) {
        round_trips(&job, "HCL");
    }
}
