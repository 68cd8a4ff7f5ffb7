//! Nomad API JSON jobs: defaults, field paths in errors, nulls, restart policy merging.

use super::*;

fn parse(v: serde_json::Value) -> R<Job> {
    parse_register_request(serde_json::to_vec(&v).unwrap().as_slice()).map(|r| r.job)
}

#[test]
fn defaults_applied() {
    let j = parse(serde_json::json!({"Job": {"ID": "a", "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "mock"}]}]}})).unwrap();
    assert_eq!(j.name, "a");
    assert_eq!(j.namespace, "default");
    assert_eq!(j.priority, 50);
    let g = &j.task_groups[0];
    assert_eq!(g.count, 1);
    assert_eq!(
        g.restart_policy,
        RestartPolicy::default_for(JobType::Service)
    );
    assert_eq!(g.tasks[0].kill_timeout, 5_000_000_000);
    assert_eq!(g.tasks[0].resources.memory_mb, 300);
}

#[test]
fn errors_name_the_field() {
    let e = parse(serde_json::json!({"Job": {"ID": "a", "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t"}]}]}})).unwrap_err();
    assert_eq!(e.path, "Job.TaskGroups[0].Tasks[0].Driver");
    let e = parse(serde_json::json!({"Job": {"ID": "a", "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "mock", "Resources": {"MemoryMB": "lots"}}]}]}})).unwrap_err();
    assert_eq!(e.path, "Job.TaskGroups[0].Tasks[0].Resources.MemoryMB");
    assert!(e.message.contains("integer"), "{e}");
    let e = parse(serde_json::json!({"Job": {"ID": "a", "Bogus": 1, "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "mock"}]}]}})).unwrap_err();
    assert_eq!(e.path, "Job.Bogus");
    let e = parse(serde_json::json!({"Job": {"TaskGroups": []}})).unwrap_err();
    assert_eq!(e.path, "Job.ID");
    let e = parse(serde_json::json!({"Job": {"ID": "a", "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Drivr": "mock"}]}]}})).unwrap_err();
    assert_eq!(e.path, "Job.TaskGroups[0].Tasks[0].Driver");
    assert!(e.message.contains("\"Drivr\": a typo?"), "{e}");
}

#[test]
fn nulls_and_ignored_fields_are_accepted() {
    let j = parse(serde_json::json!({"Job": {"ID": "a", "Name": null, "Update": {"Stagger": 1}, "TaskGroups": [{"Name": "g", "Constraints": null, "Tasks": [{"Name": "t", "Driver": "mock", "Services": null}]}]}})).unwrap();
    assert_eq!(j.name, "a");
}

#[test]
fn cluster_only_blocks_are_kept_as_given_and_read_back() {
    let services = serde_json::json!([{"Name": "web", "PortLabel": "http"}]);
    let j = parse(
        serde_json::json!({"Job": {"ID": "a", "Update": {"Stagger": 1}, "Status": "x",
        "TaskGroups": [{"Name": "g", "Services": services, "Networks": [{"DynamicPorts": [{"Label": "http"}]}],
            "ReschedulePolicy": {"Attempts": 1, "Interval": 3_600_000_000_000u64},
            "Tasks": [{"Name": "t", "Driver": "mock", "Vault": null}]}]}}),
    )
    .unwrap();
    // A service job's update, canonical as Nomad's API makes it: the given field over
    // Nomad's default.
    assert_eq!(j.kept["Update"]["Stagger"], 1);
    assert_eq!(j.kept["Update"]["MaxParallel"], 1);
    assert_eq!(j.kept["NodePool"], "default", "Nomad always sends the pool");
    assert!(
        !j.kept.contains_key("Status"),
        "server-set fields are not kept"
    );
    assert!(
        j.task_groups[0].tasks[0].kept.is_empty(),
        "null is not kept"
    );
    let wire = serde_json::to_value(&j).unwrap();
    assert_eq!(wire["TaskGroups"][0]["Services"], services);
    assert_eq!(wire["TaskGroups"][0]["ReschedulePolicy"]["Attempts"], 1);
    let back: Job = serde_json::from_value(wire).unwrap();
    assert_eq!(back, j);
}

#[test]
fn task_restart_policy_merges_over_group() {
    let j = parse(serde_json::json!({"Job": {"ID": "a", "Type": "batch", "TaskGroups": [{"Name": "g", "RestartPolicy": {"Attempts": 7}, "Tasks": [{"Name": "t", "Driver": "mock", "RestartPolicy": {"Mode": "delay"}}]}]}})).unwrap();
    let p = &j.task_groups[0].tasks[0].restart_policy;
    assert_eq!(p.attempts, 7);
    assert_eq!(p.mode, RestartMode::Delay);
    assert_eq!(
        p.interval,
        RestartPolicy::default_for(JobType::Batch).interval
    );
}

/// Found by fuzzing (`fuzz/corpus/jobspec_json/float-roundtrip`): a large number in a task's
/// config read back from the job's own JSON (as the state DB and the API keep it) as a
/// different number.
#[test]
fn numbers_in_a_config_read_back_exactly() {
    let text = r#"{"ID": "web", "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t",
        "Driver": "raw_exec", "Config": {"args": [555555550000000000000000000000000000001145844511,
        0.1, 1e300, 2.2250738585072014e-308]}}]}]}"#;
    let job = crate::jobspec::parse_job_json(text.as_bytes()).unwrap();
    let again = crate::jobspec::parse_job_json(&serde_json::to_vec(&job).unwrap()).unwrap();
    assert!(again.spec_eq(&job), "{job:?}\n{again:?}");
}
