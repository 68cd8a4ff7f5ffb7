//! A job's original source as it was submitted (Nomad's `JobSubmission`): the HCL or JSON
//! text of the job file and the variables given with it, kept per job version so the UI
//! and `GET /v1/job/{id}/submission?version=N` can show what was written, not only what
//! it became.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The most a submission may weigh (source, variables, and each `-var` name and value):
/// Nomad's default `job_max_source_size` of "1M", which it reads as 1,000,000 bytes. A
/// larger submission is discarded with a warning; the job itself is registered.
pub const MAX_SOURCE_SIZE: usize = 1_000_000;

/// Nomad's `structs.JobSubmission`, as it is stored and served.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct JobSubmission {
    /// The job file's text.
    pub source: String,
    /// What the source is: `hcl2`, `hcl1` or `json`.
    pub format: String,
    /// The `-var name=value` flags given with the job (HCL only); `null` when none.
    pub variable_flags: Option<BTreeMap<String, String>>,
    /// The variable files' (or the web form's) text, as one blob (HCL only).
    pub variables: String,
    /// The job's namespace (set by the agent).
    pub namespace: String,
    /// The job's id (set by the agent).
    #[serde(rename = "JobID")]
    pub job_id: String,
    /// The job version the submission belongs to (set by the agent).
    pub version: u64,
    /// The job's modify index at that version (set by the agent).
    pub job_modify_index: u64,
}

impl JobSubmission {
    /// What counts against [`MAX_SOURCE_SIZE`], as Nomad counts it.
    pub fn size(&self) -> usize {
        self.source.len()
            + self.variables.len()
            + self
                .variable_flags
                .iter()
                .flatten()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>()
    }

    /// Whether the source is HCL (what the UI shows beside the JSON).
    pub fn is_hcl(&self) -> bool {
        self.format.starts_with("hcl")
    }
}

/// Keep a registration's submission when it fits within `max` bytes; otherwise drop it and
/// say so in Nomad's words (the register answer's `Warnings`): the job is registered
/// either way.
pub fn admit_submission(
    submission: Option<JobSubmission>,
    max: usize,
) -> (Option<JobSubmission>, Option<String>) {
    match submission {
        Some(s) if s.size() > max => {
            let warning = format!(
                "job source size of {} exceeds maximum of {} and will be discarded",
                human_bytes(s.size() as u64),
                human_bytes(max as u64)
            );
            (None, Some(warning))
        }
        other => (other, None),
    }
}

/// A byte count in SI units as Nomad prints it (go-humanize's `Bytes`): `33 B`, `1.0 MB`,
/// `2.0 MB`, `15 MB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 7] = ["B", "kB", "MB", "GB", "TB", "PB", "EB"];
    if n < 10 {
        return format!("{n} B");
    }
    let mut e = 0usize;
    let mut scale = 1f64;
    while e + 1 < UNITS.len() && (n as f64) >= scale * 1000.0 {
        e += 1;
        scale *= 1000.0;
    }
    let val = ((n as f64) / scale * 10.0 + 0.5).floor() / 10.0;
    if val < 10.0 {
        format!("{val:.1} {}", UNITS[e])
    } else {
        format!("{val:.0} {}", UNITS[e])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_printed_as_nomad_prints_them() {
        assert_eq!(human_bytes(1), "1 B");
        assert_eq!(human_bytes(33), "33 B");
        assert_eq!(human_bytes(1_000_000), "1.0 MB");
        assert_eq!(human_bytes(2_000_000), "2.0 MB");
        assert_eq!(human_bytes(1_500_000), "1.5 MB");
        assert_eq!(human_bytes(15_000_000), "15 MB");
    }

    #[test]
    fn an_oversized_submission_is_dropped_with_nomads_warning() {
        let s = JobSubmission {
            source: "this is some hcl content".into(),
            format: "hcl2".into(),
            variables: "variables".into(),
            ..Default::default()
        };
        assert_eq!(s.size(), 33);
        let (kept, warning) = admit_submission(Some(s.clone()), 1);
        assert_eq!(kept, None);
        assert_eq!(
            warning.as_deref(),
            Some("job source size of 33 B exceeds maximum of 1 B and will be discarded")
        );
        assert_eq!(admit_submission(Some(s.clone()), 1024), (Some(s), None));
    }

    #[test]
    fn variable_flags_count_toward_the_size() {
        let s = JobSubmission {
            variable_flags: Some([("X".to_string(), "foo".to_string())].into()),
            ..Default::default()
        };
        assert_eq!(s.size(), 4);
    }

    #[test]
    fn the_wire_names_are_nomads() {
        let v = serde_json::to_value(JobSubmission::default()).unwrap();
        let mut keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "Format",
                "JobID",
                "JobModifyIndex",
                "Namespace",
                "Source",
                "VariableFlags",
                "Variables",
                "Version"
            ]
        );
    }
}
