//! The device manager: the built-in `mock-device` plugin's devices on the node, device
//! requests assigned at placement (too few free is a placement failure naming who holds
//! them, retried when one is freed), reserved at start (the plugin's env reaches the task),
//! and freed when the allocation stops.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::TestAgent;

/// A raw_exec job whose task asks for `count` devices named `request`, writes the ids it
/// was given, and keeps running.
fn device_job(id: &str, request: &str, count: u32) -> Value {
    json!({ "ID": id, "Type": "service", "TaskGroups": [{ "Name": "g", "Count": 1,
        "Tasks": [{ "Name": "t", "Driver": "raw_exec",
            "Config": { "command": "/bin/sh", "args": ["-c", "echo \"ids=$MOCK_DEVICE_IDS\" > local/ids.tmp && mv local/ids.tmp local/ids; exec sleep 600"] },
            "Resources": { "CPU": 100, "MemoryMB": 64, "Devices": [{ "Name": request, "Count": count }] } }] }] })
}

/// The ids the task of `job` wrote, and the ids its allocation says it was assigned.
async fn ids_of(t: &TestAgent, job: &str) -> (String, Vec<String>) {
    let allocs = t
        .wait_allocs(job, Duration::from_secs(30), |a| {
            a.len() == 1 && a[0]["ClientStatus"] == "running"
        })
        .await;
    let id = allocs[0]["ID"].as_str().unwrap().to_string();
    let file = t
        .agent
        .data_dir()
        .join("alloc")
        .join(&id)
        .join("t/local/ids");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let written = loop {
        if let Ok(s) = std::fs::read_to_string(&file) {
            break s.trim().to_string();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "task of {job} never wrote its ids"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let alloc = t.get(&format!("/v1/allocation/{id}")).await;
    let devices = &alloc["AllocatedResources"]["Tasks"]["t"]["Devices"];
    assert_eq!(devices.as_array().unwrap().len(), 1, "{devices}");
    assert_eq!(devices[0]["Vendor"], "paddock");
    assert_eq!(devices[0]["Type"], "mock");
    assert_eq!(devices[0]["Name"], "mock-device");
    let assigned = devices[0]["DeviceIDs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    (written, assigned)
}

async fn register(t: &TestAgent, job: Value) -> (u16, String) {
    let r = t.post_job(job).await;
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_requests_are_assigned_reserved_into_the_task_env_and_freed_on_stop() {
    let t = TestAgent::start("", vec![]).await;

    // The node lists the plugin's devices as Nomad's NodeResources.Devices.
    let node = t.get("/v1/node/self").await;
    let groups = node["NodeResources"]["Devices"].as_array().unwrap().clone();
    let mock = groups
        .iter()
        .find(|g| g["Vendor"] == "paddock" && g["Type"] == "mock")
        .unwrap_or_else(|| panic!("no mock devices on the node: {groups:#?}"));
    assert_eq!(mock["Name"], "mock-device");
    assert_eq!(mock["Attributes"]["memory_mib"]["Int"], 1024);
    let instances: Vec<&str> = mock["Instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            assert_eq!(i["Healthy"], true, "{i}");
            i["ID"].as_str().unwrap()
        })
        .collect();
    assert_eq!(instances, ["mock-0", "mock-1"]);

    // Two jobs each get one instance, not the same one, and see it in their env.
    let (status, body) = register(&t, device_job("first", "paddock/mock", 1)).await;
    assert_eq!(status, 200, "{body}");
    let (written_a, assigned_a) = ids_of(&t, "first").await;
    let (status, body) = register(&t, device_job("second", "mock", 1)).await;
    assert_eq!(status, 200, "{body}");
    let (written_b, assigned_b) = ids_of(&t, "second").await;
    assert_eq!(written_a, format!("ids={}", assigned_a.join(",")));
    assert_eq!(written_b, format!("ids={}", assigned_b.join(",")));
    let mut both = [assigned_a.clone(), assigned_b].concat();
    both.sort();
    assert_eq!(both, ["mock-0", "mock-1"]);

    // Stats: the node sees every instance, a task only its own.
    let host = t.get("/v1/client/stats").await;
    let mock = host["DeviceStats"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["Vendor"] == "paddock")
        .unwrap_or_else(|| panic!("no mock device stats: {host:#}"));
    assert_eq!(
        mock["InstanceStats"].as_object().unwrap().len(),
        2,
        "{host:#}"
    );
    let alloc_a = t.get("/v1/job/first/allocations").await[0]["ID"]
        .as_str()
        .unwrap()
        .to_string();
    let stats = t
        .get(&format!("/v1/client/allocation/{alloc_a}/stats"))
        .await;
    let task_devices = &stats["Tasks"]["t"]["ResourceUsage"]["DeviceStats"];
    let ids: Vec<&String> = task_devices[0]["InstanceStats"]
        .as_object()
        .unwrap_or_else(|| panic!("{stats:#}"))
        .keys()
        .collect();
    assert_eq!(ids, [&assigned_a[0]], "{stats:#}");
    let summary = &task_devices[0]["InstanceStats"][&assigned_a[0]]["Summary"];
    assert_eq!(summary["Unit"], "%", "{summary}");
    assert_eq!(
        stats["ResourceUsage"]["DeviceStats"], *task_devices,
        "the allocation's total lists its tasks' devices"
    );

    // A third finds none free: accepted, not placed, and the placement failure says who
    // holds the devices.
    let (status, body) = register(&t, device_job("third", "paddock/mock/mock-device", 1)).await;
    assert_eq!(status, 200, "{body}");
    let eval_id = serde_json::from_str::<Value>(&body).unwrap()["EvalID"]
        .as_str()
        .unwrap()
        .to_string();
    let eval = t.eval_done(&eval_id).await;
    let dims = eval["FailedTGAllocs"]["g"]["DimensionExhausted"]
        .as_object()
        .unwrap_or_else(|| panic!("{eval:#}"))
        .clone();
    let dim = dims.keys().next().unwrap();
    assert!(
        dim.starts_with("devices: no devices match request") && dim.contains("held by allocation"),
        "{dim}"
    );
    assert_eq!(t.get("/v1/job/third/allocations").await, json!([]));

    // A device the node does not have: filtered out, as Nomad's "missing devices".
    let (status, body) = register(&t, device_job("gpu", "nvidia/gpu", 1)).await;
    assert_eq!(status, 200, "{body}");
    let eval_id = serde_json::from_str::<Value>(&body).unwrap()["EvalID"]
        .as_str()
        .unwrap()
        .to_string();
    let eval = t.get(&format!("/v1/evaluation/{eval_id}")).await;
    assert_eq!(
        eval["FailedTGAllocs"]["g"]["ConstraintFiltered"]["missing devices"], 1,
        "{eval:#}"
    );

    // Stopping the first job frees its instance: the blocked third is placed with it.
    let r = t.http.delete(t.url("/v1/job/first")).send().await.unwrap();
    assert!(r.status().is_success());
    t.wait_allocs(
        "first",
        Duration::from_secs(30),
        crate::harness::all_terminal,
    )
    .await;
    let (written_c, assigned_c) = ids_of(&t, "third").await;
    assert_eq!(assigned_c, assigned_a, "the freed instance is reused");
    assert_eq!(written_c, format!("ids={}", assigned_c.join(",")));

    for job in ["second", "third", "gpu"] {
        t.http
            .delete(t.url(&format!("/v1/job/{job}")))
            .send()
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_asking_for_two_devices_gets_both_in_one_reservation() {
    let t = TestAgent::start("", vec![]).await;
    let (status, body) = register(&t, device_job("pair", "paddock/mock", 2)).await;
    assert_eq!(status, 200, "{body}");
    let (written, assigned) = ids_of(&t, "pair").await;
    assert_eq!(assigned, ["mock-0", "mock-1"]);
    assert_eq!(written, "ids=mock-0,mock-1");
    t.http.delete(t.url("/v1/job/pair")).send().await.unwrap();
}
