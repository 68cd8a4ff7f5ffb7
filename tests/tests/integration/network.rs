//! Group ports: static and dynamic ports reach the task as `NOMAD_*` variables and the
//! allocation's `AllocatedResources`; a static port another job holds refuses the job.

use serde_json::json;

use crate::harness::{TestAgent, stdout_of};

fn port_job(id: &str, static_port: u16, args: &str) -> serde_json::Value {
    json!({ "ID": id, "Type": "batch", "TaskGroups": [{ "Name": "g", "RestartPolicy": { "Attempts": 0 },
        "Networks": [{ "ReservedPorts": [{ "Label": "http", "Value": static_port }],
                       "DynamicPorts": [{ "Label": "metrics", "To": 9100 }, { "Label": "rpc" }] }],
        "Tasks": [{ "Name": "t", "Driver": "raw_exec",
            "Config": { "command": "/bin/sh", "args": ["-c", args] } }] }] })
}

fn free_port() -> u16 {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn static_and_dynamic_ports_reach_the_task_env_and_the_allocation() {
    let t = TestAgent::start("", vec![]).await;
    let http = free_port();
    t.post_job(port_job(
        "ports",
        http,
        "echo $NOMAD_PORT_http $NOMAD_ADDR_http $NOMAD_PORT_metrics $NOMAD_HOST_PORT_metrics $NOMAD_PORT_rpc",
    ))
    .await;
    let (a, out) = stdout_of(&t, "ports").await;
    assert_eq!(a["ClientStatus"], "complete", "{a:#}");
    let ports = a["AllocatedResources"]["Shared"]["Ports"]
        .as_array()
        .unwrap();
    let by = |l: &str| ports.iter().find(|p| p["Label"] == l).unwrap().clone();
    let (metrics, rpc) = (by("metrics"), by("rpc"));
    assert_eq!(by("http")["Value"], http);
    assert_eq!(by("http")["HostIP"], "127.0.0.1");
    for p in [&metrics, &rpc] {
        let v = p["Value"].as_u64().unwrap();
        assert!((20000..=32000).contains(&v), "{p}");
    }
    assert_ne!(metrics["Value"], rpc["Value"]);
    assert_eq!(
        out.trim(),
        format!(
            "{http} 127.0.0.1:{http} 9100 {} {}",
            metrics["Value"], rpc["Value"]
        )
    );
}

#[tokio::test]
async fn a_static_port_held_by_another_job_is_a_placement_failure_naming_the_holder() {
    let t = TestAgent::start("", vec![]).await;
    let http = free_port();
    let r = t.post_job(port_job("holder", http, "sleep 30")).await;
    assert!(r.status().is_success());
    let eval = t.register(port_job("clash", http, "true")).await;
    let dims = eval["FailedTGAllocs"]["g"]["DimensionExhausted"]
        .as_object()
        .unwrap_or_else(|| panic!("{eval:#}"))
        .clone();
    let dim = dims.keys().next().unwrap();
    assert!(
        dim.starts_with("network: ")
            && dim.contains(&format!("static port {http}"))
            && dim.contains("job \"holder\""),
        "{dim}"
    );
    assert_eq!(t.get("/v1/job/clash/allocations").await, json!([]));
    // Re-registering the holder itself may keep its port.
    let mut changed = port_job("holder", http, "sleep 31");
    changed["Priority"] = json!(60);
    assert!(t.post_job(changed).await.status().is_success());
    for job in ["holder", "clash"] {
        let _ = t.http.delete(t.url(&format!("/v1/job/{job}"))).send().await;
    }
}
