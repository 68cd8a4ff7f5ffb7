//! The rules of Nomad Variables: what a path and a namespace may be, and which variables
//! a task may read (Nomad's default workload-identity policy).

use crate::runtime::WorkloadIdentity;
use crate::runtime::types::HostError;

/// Longest path (Nomad's limit).
pub const MAX_PATH_LEN: usize = 128;
/// Largest total size of a variable's keys and values, bytes (Nomad's limit, 64 KiB).
pub const MAX_ITEMS_SIZE: usize = 64 << 10;

/// Why a variable cannot be written as asked; each message is Nomad's where Nomad has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidVariable {
    /// No path.
    #[error("variable requires path")]
    NoPath,
    /// Over [`MAX_PATH_LEN`] characters.
    #[error("invalid path {0:?}: longer than {MAX_PATH_LEN} characters")]
    PathTooLong(String),
    /// A character outside Nomad's set.
    #[error(
        "invalid path {path:?}: {found:?} is not allowed (a path holds letters, digits, \"-\", \"_\", \"~\" and \"/\")"
    )]
    PathCharacter { path: String, found: char },
    /// A leading, trailing or doubled `/`.
    #[error("invalid path {0:?}: it must not start or end with \"/\" or hold an empty segment")]
    PathSlash(String),
    /// `nomad` alone.
    #[error(
        "\"nomad\" is a reserved top-level directory path, but you may write variables to \"nomad/jobs\", \"nomad/job-templates\", or below"
    )]
    ReservedNomad,
    /// `nomad/job-templates` itself, or deeper than one level below it.
    #[error(
        "\"nomad/job-templates\" is a reserved directory path, but you may write variables at the level below it, for example, \"nomad/job-templates/template-name\""
    )]
    ReservedJobTemplates,
    /// Under `nomad/` but not `nomad/jobs` or `nomad/job-templates`.
    #[error(
        "only paths at \"nomad/jobs\" or \"nomad/job-templates\" and below are valid paths under the top-level \"nomad\" directory"
    )]
    ReservedNomadSubpath,
    /// No items.
    #[error("variable missing required Items object")]
    NoItems,
    /// Keys and values over [`MAX_ITEMS_SIZE`] bytes.
    #[error("variables are limited to 64KiB in total size")]
    TooLarge,
    /// The `*` namespace, which only lists may name.
    #[error("can not target wildcard (\"*\") namespace")]
    WildcardNamespace,
    /// A namespace name Nomad would not accept.
    #[error("invalid namespace {0:?}: a namespace name is 1 to 128 letters, digits and \"-\"")]
    Namespace(String),
    /// The body names another path than the URL.
    #[error("Path {body:?} in the body does not match the path in the URL ({url:?})")]
    PathMismatch { body: String, url: String },
}

/// Check `path` against Nomad's rules for a variable path.
pub fn validate_path(path: &str) -> Result<(), InvalidVariable> {
    if path.is_empty() {
        return Err(InvalidVariable::NoPath);
    }
    if path.chars().count() > MAX_PATH_LEN {
        return Err(InvalidVariable::PathTooLong(path.to_string()));
    }
    if let Some(found) = path
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '~' | '/')))
    {
        return Err(InvalidVariable::PathCharacter {
            path: path.to_string(),
            found,
        });
    }
    let parts: Vec<&str> = path.split('/').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(InvalidVariable::PathSlash(path.to_string()));
    }
    match parts.as_slice() {
        ["nomad"] => Err(InvalidVariable::ReservedNomad),
        ["nomad", "jobs", ..] | ["nomad", "job-templates", _] => Ok(()),
        ["nomad", "job-templates", ..] => Err(InvalidVariable::ReservedJobTemplates),
        ["nomad", ..] => Err(InvalidVariable::ReservedNomadSubpath),
        _ => Ok(()),
    }
}

/// Check a namespace a variable is written to or deleted from.
pub(super) fn validate_namespace(ns: &str) -> Result<(), InvalidVariable> {
    if ns == "*" {
        return Err(InvalidVariable::WildcardNamespace);
    }
    let ok = !ns.is_empty()
        && ns.len() <= 128
        && ns.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(InvalidVariable::Namespace(ns.to_string()))
    }
}

/// Whether a task may read the variable at `path` in its own namespace: Nomad's default
/// workload-identity policy, which gives read and list on exactly `nomad/jobs`,
/// `nomad/jobs/<job>`, `nomad/jobs/<job>/<group>` and `nomad/jobs/<job>/<group>/<task>`.
///
/// Compared path segment by segment, each of job, group and task one whole segment: Nomad
/// compares the joined strings, so a job `web/db` there reads `nomad/jobs/web/db`, which
/// is job `web`'s group `db`. Here a job id or group name holding a `/` matches no
/// segment, and such a job reads `nomad/jobs` alone.
pub fn may_read(who: &WorkloadIdentity, path: &str) -> bool {
    let expected = [
        "nomad",
        "jobs",
        who.job_id.as_str(),
        who.group.as_str(),
        who.task.as_str(),
    ];
    let parts: Vec<&str> = path.split('/').collect();
    parts.len() >= 2
        && parts.len() <= expected.len()
        && parts
            .iter()
            .zip(expected)
            .all(|(p, e)| !e.contains('/') && *p == e)
}

/// The permission-denied answer to a task reading `path`, naming what it may read.
pub(super) fn denied(who: &WorkloadIdentity, path: &str) -> HostError {
    HostError::Denied(format!(
        "Permission denied: task {:?} of job {:?} may not read variable {path:?}; it reads nomad/jobs, nomad/jobs/{job}, nomad/jobs/{job}/{group} and nomad/jobs/{job}/{group}/{task} in namespace {:?}",
        who.task,
        who.job_id,
        who.namespace,
        job = who.job_id,
        group = who.group,
        task = who.task,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_nomads_rules() {
        for ok in [
            "a",
            "a/b-c_d~e",
            "nomad/jobs",
            "nomad/jobs/x/y/z",
            "nomad/job-templates/t",
        ] {
            assert_eq!(validate_path(ok), Ok(()), "{ok}");
        }
        let long = "a".repeat(129);
        for (bad, want) in [
            ("", "requires path"),
            (long.as_str(), "longer than 128"),
            ("a b", "' ' is not allowed"),
            ("a.b", "'.' is not allowed"),
            ("/a", "must not start or end"),
            ("a/", "must not start or end"),
            ("a//b", "empty segment"),
            ("nomad", "reserved top-level"),
            ("nomad/job-templates", "reserved directory"),
            ("nomad/job-templates/a/b", "reserved directory"),
            ("nomad/other", "only paths at"),
        ] {
            let e = validate_path(bad).unwrap_err().to_string();
            assert!(e.contains(want), "{bad:?}: {e}");
        }
    }

    #[test]
    fn a_task_reads_exactly_its_job_group_and_task_paths_and_nomad_jobs() {
        let who = WorkloadIdentity {
            namespace: "default".into(),
            job_id: "web".into(),
            group: "g".into(),
            task: "t".into(),
        };
        for p in [
            "nomad/jobs",
            "nomad/jobs/web",
            "nomad/jobs/web/g",
            "nomad/jobs/web/g/t",
        ] {
            assert!(may_read(&who, p), "{p}");
        }
        for p in [
            "nomad",
            "nomad/jobs/we",
            "nomad/jobs/web2",
            "nomad/jobs/web/g/t/x",
            "nomad/jobs/web/h",
            "web",
        ] {
            assert!(!may_read(&who, p), "{p}");
        }
        // A job whose id holds a `/` does not read the variables of the job and group its
        // id spells.
        let slashed = WorkloadIdentity {
            job_id: "web/g".into(),
            ..who
        };
        assert!(may_read(&slashed, "nomad/jobs"));
        for p in ["nomad/jobs/web/g", "nomad/jobs/web/g/g", "nomad/jobs/web"] {
            assert!(!may_read(&slashed, p), "{p}");
        }
    }
}
