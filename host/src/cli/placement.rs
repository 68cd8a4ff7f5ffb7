//! Nomad's "Placement Failure" text, which `job run`, `job status`, `job plan` and
//! `eval status` print for an evaluation that could not place everything.

use serde_json::Value;

/// Nomad's "Placement Failure" section (as `nomad job status` prints it) for an
/// evaluation that could not place everything, or `None` when it placed all.
pub fn placement_failure(eval: &Value) -> Option<String> {
    use std::fmt::Write;
    let failed = eval["FailedTGAllocs"]
        .as_object()
        .filter(|m| !m.is_empty())?;
    let mut out = String::from("Placement Failure\n");
    for (group, m) in failed {
        let n = m["CoalescedFailures"].as_u64().unwrap_or(0) + 1;
        let _ = writeln!(
            out,
            "Task Group {group:?} (failed to place {n} allocation{}):",
            if n == 1 { "" } else { "s" }
        );
        let each = |key: &str| {
            m[key]
                .as_object()
                .map(|o| {
                    o.iter()
                        .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        };
        if m["NodesEvaluated"].as_u64() == Some(0) {
            let _ = writeln!(out, "  * No nodes were eligible for evaluation");
        }
        for (dc, available) in each("NodesAvailable") {
            if available == 0 {
                let _ = writeln!(out, "  * No nodes are available in datacenter {dc:?}");
            }
        }
        for (class, num) in each("ClassFiltered") {
            let _ = writeln!(out, "  * Class {class:?}: {num} nodes excluded by filter");
        }
        for (c, num) in each("ConstraintFiltered") {
            let _ = writeln!(out, "  * Constraint {c:?}: {num} nodes excluded by filter");
        }
        if let Some(n) = m["NodesExhausted"].as_u64().filter(|n| *n > 0) {
            let _ = writeln!(out, "  * Resources exhausted on {n} nodes");
        }
        for (d, num) in each("DimensionExhausted") {
            let _ = writeln!(out, "  * Dimension {d:?} exhausted on {num} nodes");
        }
    }
    Some(out)
}
