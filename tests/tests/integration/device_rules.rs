//! Device requests with `constraint` and `affinity` blocks, against the `mock-device`
//! plugin configured with groups that carry attributes: a group that fails a constraint is
//! not used (none left is Nomad's `missing devices`, naming the constraint), affinities
//! rank the rest, bad rules are a 400 naming the field; and around them, the node's
//! `ComputedClass`, the device metrics under Nomad's host-metric names, and one device
//! group used by two tasks shown once in the allocation's stats.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::TestAgent;

/// Two GPU groups: `t4` (16 GiB, listed first) and `a100` (40 GiB).
const GPUS: &str = r#"
plugin "mock-device" {
  config {
    devices = [
      { vendor = "acme", type = "gpu", name = "t4", ids = ["t0", "t1"],
        attributes = { memory_mib = 16384, cuda = "sm75" } },
      { vendor = "acme", type = "gpu", name = "a100", ids = ["a0", "a1"],
        attributes = { memory_mib = 40960, cuda = "sm80,sm86", driver = "535.104.05" } },
    ]
  }
}
"#;

/// A raw_exec job whose task asks for one `device` (Nomad's JSON `RequestedDevice`).
fn job(id: &str, device: Value) -> Value {
    json!({ "ID": id, "Type": "service", "TaskGroups": [{ "Name": "g", "Count": 1,
        "Tasks": [{ "Name": "t", "Driver": "raw_exec",
            "Config": { "command": "/bin/sleep", "args": ["600"] },
            "Resources": { "CPU": 50, "MemoryMB": 32, "Devices": [device] } }] }] })
}

/// Register `job`: the group (`vendor/type/name`) and ids its task was given, or the
/// evaluation when nothing was placed.
async fn placed(t: &TestAgent, job: Value) -> Result<(String, Vec<String>), Value> {
    let id = job["ID"].as_str().unwrap().to_string();
    let eval = t.register(job).await;
    let allocs = t.get(&format!("/v1/job/{id}/allocations")).await;
    let Some(alloc) = allocs.as_array().unwrap().first() else {
        return Err(eval);
    };
    let alloc = t
        .get(&format!("/v1/allocation/{}", alloc["ID"].as_str().unwrap()))
        .await;
    let d = &alloc["AllocatedResources"]["Tasks"]["t"]["Devices"][0];
    let group = format!("{}/{}/{}", d["Vendor"], d["Type"], d["Name"]).replace('"', "");
    let ids = d["DeviceIDs"]
        .as_array()
        .unwrap_or_else(|| panic!("{alloc:#}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    Ok((group, ids))
}

fn constraint(l: &str, op: &str, r: &str) -> Value {
    json!({ "LTarget": l, "RTarget": r, "Operand": op })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn constraints_choose_device_groups_and_affinities_rank_them() {
    let t = TestAgent::start(GPUS, vec![]).await;

    // The plugin's numbers carry the unit their names imply, as Nomad shows them.
    let node = t.get("/v1/node/self").await;
    let groups = node["NodeResources"]["Devices"].as_array().unwrap();
    let a100 = groups.iter().find(|g| g["Name"] == "a100").unwrap();
    assert_eq!(
        a100["Attributes"]["memory_mib"],
        json!({ "Int": 40960, "Unit": "MiB" })
    );
    assert_eq!(
        a100["Attributes"]["cuda"],
        json!({ "String": "sm80,sm86", "Unit": "" })
    );

    // No constraint, an affinity for sm86: the a100 ranks first although listed second.
    let pref = json!({ "Name": "gpu", "Count": 1, "Affinities": [
        { "LTarget": "${device.attr.cuda}", "RTarget": "sm86", "Operand": "set_contains_any", "Weight": 80 }] });
    let (group, _) = placed(&t, job("prefers", pref)).await.unwrap();
    assert_eq!(group, "acme/gpu/a100");
    // A negative weight pushes the t4 down; the version one pulls the a100 up.
    let avoid = json!({ "Name": "gpu", "Count": 1, "Affinities": [
        { "LTarget": "${device.model}", "RTarget": "t4", "Operand": "=", "Weight": -50 },
        { "LTarget": "${device.attr.driver}", "RTarget": ">= 500", "Operand": "version", "Weight": 50 }] });
    let (group, _) = placed(&t, job("avoids", avoid)).await.unwrap();
    assert_eq!(group, "acme/gpu/a100");

    // Memory compared after unit conversion: only the a100 has 32 GiB, and both are held
    // now: exhausted, as a request with no rules is, not placed on a t4.
    let big = json!({ "Name": "acme/gpu", "Count": 1,
        "Constraints": [constraint("${device.attr.memory}", ">=", "32 GiB")] });
    let eval = placed(&t, job("big", big)).await.unwrap_err();
    let dims = eval["FailedTGAllocs"]["g"]["DimensionExhausted"]
        .as_object()
        .unwrap_or_else(|| panic!("{eval:#}"));
    let dim = dims.keys().next().unwrap();
    assert!(
        dim.starts_with("devices: no devices match request") && dim.contains("a100"),
        "{dim}"
    );
    assert!(
        !dim.contains("acme/gpu/t4"),
        "the t4 is not a candidate: {dim}"
    );

    // The job reads back with its rules as Nomad writes them.
    let read = t.get("/v1/job/big").await;
    let d = &read["TaskGroups"][0]["Tasks"][0]["Resources"]["Devices"][0];
    assert_eq!(
        d["Constraints"],
        json!([{ "LTarget": "${device.attr.memory}", "RTarget": "32 GiB", "Operand": ">=" }])
    );
    assert_eq!(d["Affinities"], Value::Null);

    // `${device.ids}` narrows the instances: a0 is held, so t1, not t0.
    let by_id = json!({ "Name": "acme/gpu", "Count": 1,
        "Constraints": [constraint("${device.ids}", "set_contains_any", "t1,a0")] });
    let (group, ids) = placed(&t, job("by-id", by_id)).await.unwrap();
    assert_eq!(
        (group.as_str(), ids),
        ("acme/gpu/t4", vec!["t1".to_string()])
    );

    // Units both ways: 16 GiB is 16384 MiB.
    let fits = json!({ "Name": "acme/gpu", "Count": 1, "Constraints": [
        constraint("${device.attr.memory}", ">=", "16 GiB"),
        constraint("${device.attr.memory_mib}", "<=", "16384 MiB")] });
    let (group, ids) = placed(&t, job("fits", fits)).await.unwrap();
    assert_eq!(
        (group.as_str(), ids),
        ("acme/gpu/t4", vec!["t0".to_string()])
    );

    // No group meets the constraint: not placed, Nomad's `missing devices` naming why.
    let huge = json!({ "Name": "acme/gpu", "Count": 1,
        "Constraints": [constraint("${device.attr.memory_mib}", ">", "64 GiB")] });
    let eval = placed(&t, job("huge", huge)).await.unwrap_err();
    let filtered = eval["FailedTGAllocs"]["g"]["ConstraintFiltered"]
        .as_object()
        .unwrap_or_else(|| panic!("{eval:#}"));
    let why = filtered.keys().next().unwrap();
    assert!(why.starts_with("missing devices: "), "{why}");
    for g in ["acme/gpu/t4", "acme/gpu/a100"] {
        assert!(
            why.contains(&format!("{g} fails ${{device.attr.memory_mib}} > 64 GiB")),
            "{why}"
        );
    }

    for id in ["prefers", "avoids", "big", "by-id", "fits", "huge"] {
        t.http
            .delete(t.url(&format!("/v1/job/{id}")))
            .send()
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_device_rules_are_a_400_naming_the_field() {
    let t = TestAgent::start(GPUS, vec![]).await;
    let at = "Job.TaskGroups[0].Tasks[0].Resources.Devices[0]";
    for (device, field, says) in [
        (
            json!({ "Name": "gpu", "Constraints": [constraint("${device.model}", "~", "a100")] }),
            "Constraints[0].Operand",
            "unknown operator",
        ),
        (
            json!({ "Name": "gpu", "Constraints": [constraint("${device.attr.memory}", ">=", "4 GiBs")] }),
            "Constraints[0].RTarget",
            "unknown unit",
        ),
        (
            json!({ "Name": "gpu", "Affinities": [{ "LTarget": "${device.model}", "RTarget": "a100", "Operand": "=", "Weight": 0 }] }),
            "Affinities[0].Weight",
            "non-zero",
        ),
    ] {
        let r = t.post_job(job("bad", device)).await;
        let status = r.status().as_u16();
        let body = r.text().await.unwrap();
        assert_eq!(status, 400, "{body}");
        assert!(body.contains(&format!("{at}.{field}")), "{body}");
        assert!(body.contains(says), "{body}");
    }
    // The HCL form, parsed by the agent, says the same.
    let hcl = r#"job "bad" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
      resources {
        device "acme/gpu" {
          constraint {
            attribute = "${device.attr.memory}"
            operator  = "bigger"
            value     = "4 GiB"
          }
        }
      }
    }
  }
}"#;
    let (status, body) = t.post("/v1/jobs/parse", json!({ "JobHCL": hcl })).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("unknown operator"), "{body}");
    assert_eq!(t.get("/v1/jobs").await, json!([]));
}

/// An agent whose mock device group has `ids` and `memory_mib`, and its node's class.
async fn class_of(ids: &str, memory_mib: u32, serial: &str) -> String {
    let config = format!(
        r#"plugin "mock-device" {{
  config {{
    devices = [{{ vendor = "acme", type = "gpu", name = "a100", ids = [{ids}],
      attributes = {{ memory_mib = {memory_mib}, "unique.serial" = "{serial}" }} }}]
  }}
}}"#
    );
    let t = TestAgent::start(&config, vec![]).await;
    let node = t.get("/v1/node/self").await;
    let class = node["ComputedClass"].as_str().unwrap().to_string();
    assert!(
        class.starts_with("v1:") && class[3..].parse::<u64>().is_ok(),
        "{class}"
    );
    class
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_with_the_same_devices_share_a_computed_class() {
    let a = class_of(r#""a0", "a1""#, 40960, "S-1").await;
    let b = class_of(r#""b7""#, 40960, "S-2").await;
    assert_eq!(a, b, "instance ids and unique attributes do not count");
    let c = class_of(r#""a0", "a1""#, 81920, "S-1").await;
    assert_ne!(a, c, "a device group's attributes count");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_stats_are_metrics_and_merge_per_group_in_an_allocation() {
    // The default mock group: paddock/mock/mock-device with mock-0 and mock-1.
    let t = TestAgent::start("", vec![]).await;
    let task = |name: &str| {
        json!({ "Name": name, "Driver": "raw_exec",
            "Config": { "command": "/bin/sleep", "args": ["600"] },
            "Resources": { "CPU": 50, "MemoryMB": 32,
                "Devices": [{ "Name": "paddock/mock", "Count": 1 }] } })
    };
    let two = json!({ "ID": "two", "Type": "service", "TaskGroups": [{ "Name": "g",
        "Tasks": [task("one"), task("other")] }] });
    t.register(two).await;
    let allocs = t
        .wait_allocs("two", Duration::from_secs(30), |a| {
            a.len() == 1 && a[0]["ClientStatus"] == "running"
        })
        .await;
    let id = allocs[0]["ID"].as_str().unwrap().to_string();
    let stats = t.get(&format!("/v1/client/allocation/{id}/stats")).await;
    for task in ["one", "other"] {
        let own = &stats["Tasks"][task]["ResourceUsage"]["DeviceStats"];
        assert_eq!(own.as_array().unwrap().len(), 1, "{stats:#}");
        assert_eq!(own[0]["InstanceStats"].as_object().unwrap().len(), 1);
    }
    let total = stats["ResourceUsage"]["DeviceStats"].as_array().unwrap();
    assert_eq!(total.len(), 1, "one group, once: {stats:#}");
    assert_eq!(total[0]["Name"], "mock-device");
    let mut ids: Vec<&String> = total[0]["InstanceStats"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    ids.sort();
    assert_eq!(ids, ["mock-0", "mock-1"]);

    // Every instance's health and stats in /v1/metrics, JSON and Prometheus.
    let m = t.get("/v1/metrics").await;
    let gauges = m["Gauges"].as_array().unwrap();
    for id in ["mock-0", "mock-1"] {
        for name in [
            "nomad.client.host.device.healthy",
            "nomad.client.host.device.summary",
        ] {
            let g = gauges
                .iter()
                .find(|g| g["Name"] == name && g["Labels"]["device_id"] == id)
                .unwrap_or_else(|| panic!("no {name} for {id}: {m:#}"));
            assert_eq!(g["Labels"]["device_vendor"], "paddock");
            assert_eq!(g["Labels"]["device_type"], "mock");
            assert_eq!(g["Labels"]["device_name"], "mock-device");
            assert!(g["Labels"]["node_id"].is_string());
        }
    }
    let healthy = gauges
        .iter()
        .find(|g| g["Name"] == "nomad.client.host.device.healthy")
        .unwrap();
    assert_eq!(healthy["Value"], 1.0);
    let summary = gauges
        .iter()
        .find(|g| g["Name"] == "nomad.client.host.device.summary")
        .unwrap();
    assert_eq!(summary["Labels"]["unit"], "%");
    let text = t
        .http
        .get(t.url("/v1/metrics?format=prometheus"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("# TYPE nomad_client_host_device_healthy gauge"),
        "{text}"
    );
    let line = text
        .lines()
        .find(|l| l.starts_with("nomad_client_host_device_summary{") && l.contains("mock-1"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("device_vendor=\"paddock\""), "{line}");
    assert!(line.ends_with(" 0"), "{line}");

    t.http.delete(t.url("/v1/job/two")).send().await.unwrap();
}
