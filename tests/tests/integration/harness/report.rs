//! What a timed-out wait prints: CI keeps only the head of a long failure, so the summary
//! of why comes before the full JSON.

use serde_json::Value;

/// One line per allocation (name, client status, each task's state): what a timed-out wait
/// prints first, since CI keeps only the head of a long failure.
pub fn alloc_summary(allocs: &[Value]) -> String {
    let mut out = format!("{} allocations:", allocs.len());
    for a in allocs {
        let tasks: Vec<String> = a["TaskStates"]
            .as_object()
            .map(|t| {
                t.iter()
                    .map(|(name, s)| format!("{name}={}", s["State"].as_str().unwrap_or("?")))
                    .collect()
            })
            .unwrap_or_default();
        out += &format!(
            "\n  {} {} [{}]",
            a["Name"].as_str().unwrap_or("?"),
            a["ClientStatus"].as_str().unwrap_or("?"),
            tasks.join(" ")
        );
    }
    out
}

/// One line per evaluation (status, its description, each group's placement failure),
/// which says why a job has no allocations.
pub fn eval_summary(evals: &Value) -> String {
    let evals = evals.as_array().cloned().unwrap_or_default();
    let mut out = format!("{} evaluations:", evals.len());
    for e in &evals {
        out += &format!(
            "\n  {} {} {:?} failed: {}",
            e["TriggeredBy"].as_str().unwrap_or("?"),
            e["Status"].as_str().unwrap_or("?"),
            e["StatusDescription"].as_str().unwrap_or(""),
            e["FailedTGAllocs"]
        );
    }
    out
}
