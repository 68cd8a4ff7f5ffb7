use serde_json::json;

use super::*;
use crate::structs::TaskEvent;

/// An allocation of a job with a group service on port `http` (a canary tag set) and a
/// task service with no port, its task in `state`.
fn alloc(state: &str) -> Allocation {
    let job = json!({"ID": "web", "Type": "service", "TaskGroups": [{"Name": "g",
        "Networks": [{"DynamicPorts": [{"Label": "http", "To": 8080}]}],
        "Services": [{"Name": "${NOMAD_JOB_ID}-api", "PortLabel": "http", "Tags": ["v1", "${NOMAD_GROUP_NAME}"],
            "CanaryTags": ["canary"], "Provider": "nomad"}],
        "Tasks": [{"Name": "t", "Driver": "mock",
            "Services": [{"Name": "metrics", "Provider": "nomad", "AddressMode": "alloc", "PortLabel": "http"}]}]}]});
    let job = crate::jobspec::parse_job_json(job.to_string().as_bytes()).unwrap();
    serde_json::from_value(json!({
        "ID": "a1", "Namespace": "default", "EvalID": "e", "Name": "web.g[0]", "NodeID": "n1",
        "NodeName": "node", "JobID": "web", "Job": job, "TaskGroup": "g", "DesiredStatus": "run",
        "DesiredDescription": "", "ClientStatus": if state == "running" { "running" } else { "pending" },
        "ClientDescription": "",
        "TaskStates": { "t": { "State": state, "Failed": false, "Restarts": 0, "LastRestart": "0001-01-01T00:00:00Z",
            "StartedAt": "0001-01-01T00:00:00Z", "FinishedAt": "0001-01-01T00:00:00Z", "Events": [] } },
        "AllocatedResources": { "Tasks": {}, "Shared": { "DiskMB": 0,
            "Ports": [{ "Label": "http", "Value": 23456, "To": 8080, "HostIP": "10.0.0.5" }] } },
        "CreateIndex": 1, "ModifyIndex": 1, "CreateTime": 0, "ModifyTime": 0,
    }))
    .unwrap()
}

fn interp(task: Option<&str>, s: &str) -> String {
    s.replace("${NOMAD_JOB_ID}", "web")
        .replace("${NOMAD_GROUP_NAME}", "g")
        .replace("${NOMAD_TASK_NAME}", task.unwrap_or(""))
}

#[test]
fn a_running_allocation_registers_its_group_and_task_services() {
    let a = alloc("running");
    let regs = wanted(&a, "127.0.0.1", "dc1", &interp);
    assert_eq!(regs.len(), 2, "{regs:?}");
    let api = &regs[0];
    assert_eq!(api.id, "_nomad-task-a1-group-g-web-api-http");
    assert_eq!(api.service_name, "web-api");
    assert_eq!((api.address.as_str(), api.port), ("10.0.0.5", 23456));
    assert_eq!(api.tags, ["v1", "g"]);
    assert_eq!(
        (
            api.namespace.as_str(),
            api.job_id.as_str(),
            api.node_id.as_str()
        ),
        ("default", "web", "n1")
    );
    assert_eq!(api.datacenter, "dc1");
    let metrics = &regs[1];
    assert_eq!(metrics.id, "_nomad-task-a1-t-metrics-http");
    assert_eq!(
        metrics.port, 8080,
        "address_mode alloc: the port inside the task"
    );
}

#[test]
fn nothing_is_registered_before_the_task_runs_or_once_it_is_stopped() {
    assert!(wanted(&alloc("pending"), "127.0.0.1", "dc1", &interp).is_empty());
    let mut a = alloc("running");
    a.task_states
        .get_mut("t")
        .unwrap()
        .push_event(TaskEvent::new(TaskEventType::Killing, "stop"));
    assert!(
        wanted(&a, "127.0.0.1", "dc1", &interp).is_empty(),
        "a task being killed is down"
    );
    let mut a = alloc("running");
    a.desired_status = DesiredStatus::Stop;
    assert!(
        wanted(&a, "127.0.0.1", "dc1", &interp).is_empty(),
        "a stop deregisters at once"
    );
}

#[test]
fn a_canary_carries_its_canary_tags() {
    let mut a = alloc("running");
    a.lineage.deployment_status = Some(crate::structs::AllocDeploymentStatus {
        canary: true,
        ..Default::default()
    });
    assert_eq!(wanted(&a, "127.0.0.1", "dc1", &interp)[0].tags, ["canary"]);
}

#[test]
fn choose_is_stable_per_key_and_checks_its_parameter() {
    let regs: Vec<ServiceRegistration> = (0..5)
        .map(|i| ServiceRegistration {
            id: format!("s{i}"),
            service_name: "web".into(),
            namespace: "default".into(),
            node_id: "n".into(),
            datacenter: "dc1".into(),
            job_id: "j".into(),
            alloc_id: format!("a{i}"),
            tags: vec![],
            address: "127.0.0.1".into(),
            port: 20000 + i,
            create_index: 1,
            modify_index: 1,
        })
        .collect();
    let a = choose(regs.clone(), "2|caller-1").unwrap();
    assert_eq!(a.len(), 2);
    assert_eq!(
        a,
        choose(regs.clone(), "2|caller-1").unwrap(),
        "the same key, the same choice"
    );
    let mut r = regs.clone();
    r.reverse();
    assert_eq!(
        a,
        choose(r, "2|caller-1").unwrap(),
        "whatever the order they come in"
    );
    assert_eq!(choose(regs.clone(), "9|k").unwrap().len(), 5);
    for bad in ["2", "x|k", "2|"] {
        assert_eq!(
            choose(regs.clone(), bad).unwrap_err(),
            "Parameter for choose must be in form '<number>|<key>'"
        );
    }
}

#[test]
fn problems_are_worded_with_the_owner_and_the_field() {
    let s = ServiceSpec::from_json(
        &json!({"Name": "web", "PortLabel": "htp", "AddressMode": "driver", "Provider": "x"}),
    );
    let p = s.problems(&["http".to_string()]);
    assert!(
        p.iter()
            .any(|m| m.contains("port label \"htp\" does not exist")),
        "{p:?}"
    );
    assert!(
        p.iter().any(|m| m.contains("address_mode \"driver\"")),
        "{p:?}"
    );
    assert!(p.iter().any(|m| m.contains("provider \"x\"")), "{p:?}");
    let bad_name = ServiceSpec::from_json(&json!({"Name": "web_api"}));
    assert_eq!(bad_name.problems(&[]).len(), 1);
    assert!(
        ServiceSpec::from_json(&json!({"Name": "web-api", "PortLabel": "8080"}))
            .problems(&[])
            .is_empty()
    );
}
