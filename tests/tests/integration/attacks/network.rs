//! What a check component hands the host's sockets and `wasi:http`: a connect or a request
//! outside its `network` grant (the agent's own API, the cloud metadata address), a
//! listening socket, a datagram. The
//! `hostile-check` fixture ignores its target and does what each check's `Body` says; the
//! grant allows the dynamic port range on loopback only.

use serde_json::{Value, json};

use super::{agent, eventually, running};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_component_reaches_only_what_its_network_grant_lists() {
    let dir = tempfile::tempdir().unwrap();
    let comps = dir.path().join("components");
    std::fs::create_dir_all(&comps).unwrap();
    let fixture = guest_artifacts::FIXTURE_HOSTILE_CHECK;
    std::fs::write(comps.join(fixture.file_name), fixture.bytes).unwrap();
    let extra = r#"
plugin "hostile-check" {
  file = "fixture_hostile_check.wasm"
  grant {
    network {
      hosts = ["127.0.0.1:20000-32000"]
    }
  }
}
"#;
    let a = agent(dir.path(), "", extra).await;
    let api = a.port;
    let second = 1_000_000_000u64;
    let check = |name: &str, body: String| {
        json!({ "Name": name, "Type": "hostile-check", "Body": body,
            "Interval": second, "Timeout": second })
    };
    let job = json!({ "ID": "victim", "Type": "service", "TaskGroups": [{ "Name": "g",
        "Networks": [{ "DynamicPorts": [{ "Label": "p" }] }],
        "Services": [{ "Name": "victim", "PortLabel": "p", "Provider": "nomad", "Checks": [
            check("api", format!("connect 127.0.0.1:{api}")),
            check("metadata", "connect 169.254.169.254:80".into()),
            check("listen", "listen".into()),
            check("udp", "udp 127.0.0.1:53".into()),
            check("target", "target".into()),
            check("http-api", format!("http http://127.0.0.1:{api}/v1/agent/self")),
        ] }],
        "Tasks": [{ "Name": "t", "Driver": "raw_exec",
            "Config": { "command": "/usr/bin/sleep", "args": ["600"] },
            "Resources": { "CPU": 20, "MemoryMB": 16 } }] }] });
    a.post_job(job).await;
    let id = running(&a, "victim").await;
    let path = format!("/v1/client/allocation/{id}/checks");
    let mut results = Value::Null;
    eventually("every check has a result", async || {
        results = a.get(&path).await;
        results.as_object().is_some_and(|m| {
            m.len() == 6
                && m.values()
                    .all(|r| r["Status"] == "failure" && r["Output"] != "")
        })
    })
    .await;
    let by_name = |n: &str| -> String {
        results
            .as_object()
            .unwrap()
            .values()
            .find(|r| r["Check"] == n)
            .and_then(|r| r["Output"].as_str())
            .unwrap_or_else(|| panic!("{results:#}"))
            .to_string()
    };
    for (check, addr) in [
        ("api", format!("127.0.0.1:{api}")),
        ("metadata", "169.254.169.254:80".into()),
    ] {
        let out = by_name(check);
        assert!(
            out.contains(&format!(
                "component \"hostile-check\" may not connect to {addr}"
            )) && out.contains("127.0.0.1:20000-32000"),
            "{check}: {out}"
        );
    }
    // The same wall for `wasi:http`'s requests.
    let out = by_name("http-api");
    assert!(
        out.contains(&format!(
            "component \"hostile-check\" may not send an HTTP request to 127.0.0.1:{api}"
        )),
        "{out}"
    );
    let out = by_name("listen");
    assert!(out.contains("may not listen"), "{out}");
    let out = by_name("udp");
    assert!(!out.contains("sent a datagram"), "{out}");
    // Its own target, in the grant: the connect goes out (nothing listens there).
    let out = by_name("target");
    assert!(
        !out.contains("network` grant") && out.contains("dial tcp"),
        "{out}"
    );
    // The agent serves on.
    assert!(a.get("/v1/agent/health").await.is_object());
}
