//! Job submissions in the state DB: kept per version beside the version, dropped with it,
//! forgotten with the job, and kept over a reopen of a redb file.

use super::*;
use crate::structs::JobSubmission;

fn job(id: &str, version: u64) -> Job {
    let v = serde_json::json!({ "ID": id, "TaskGroups": [{ "Name": "g",
        "Tasks": [{ "Name": "t", "Driver": "mock" }] }] });
    let mut job = crate::jobspec::parse_job_json(v.to_string().as_bytes()).unwrap();
    job.state.version = version;
    job
}

fn source(id: &str, version: u64) -> JobSubmission {
    JobSubmission {
        source: format!("job {id:?} {{ # v{version} }}"),
        format: "hcl2".into(),
        namespace: "default".into(),
        job_id: id.into(),
        version,
        ..Default::default()
    }
}

#[test]
fn a_submission_lives_as_long_as_its_version() {
    let db = MemState::new();
    for v in 0..=JOB_VERSIONS_KEPT {
        db.queue_job_version(&job("a", v), None, Some(&source("a", v)))
            .unwrap()
            .wait()
            .unwrap();
    }
    // A job whose id extends this one's keeps its own.
    db.queue_job_version(&job("a/b", 0), None, Some(&source("a/b", 0)))
        .unwrap()
        .wait()
        .unwrap();
    // The oldest version went with its source; the kept ones keep theirs.
    assert_eq!(db.job_submission("default", "a", 0).unwrap(), None);
    for v in 1..=JOB_VERSIONS_KEPT {
        assert_eq!(
            db.job_submission("default", "a", v).unwrap(),
            Some(source("a", v))
        );
    }
    // A version stored without one has none.
    db.put_job(&job("a", JOB_VERSIONS_KEPT + 1)).unwrap();
    assert_eq!(
        db.job_submission("default", "a", JOB_VERSIONS_KEPT + 1)
            .unwrap(),
        None
    );
    db.delete_job("default", "a").unwrap();
    for v in 0..=JOB_VERSIONS_KEPT + 1 {
        assert_eq!(db.job_submission("default", "a", v).unwrap(), None);
    }
    assert_eq!(
        db.job_submission("default", "a/b", 0).unwrap(),
        Some(source("a/b", 0))
    );
}

#[test]
fn a_submission_is_kept_in_the_redb_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        let db = RedbState::open(&path).unwrap();
        db.queue_job_version(&job("web", 0), Some("e1"), Some(&source("web", 0)))
            .unwrap()
            .wait()
            .unwrap();
    }
    let db = RedbState::open(&path).unwrap();
    assert_eq!(
        db.job_submission("default", "web", 0).unwrap(),
        Some(source("web", 0))
    );
}
