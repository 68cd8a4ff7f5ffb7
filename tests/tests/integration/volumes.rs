//! Host volumes (`client { host_volume }`, a group's `volume`, a task's `volume_mount`) on
//! real folders, bound by the host into real `exec` chroots (as root), with a reserved
//! device node made in the task's `/dev`.

use std::os::unix::fs::PermissionsExt;

use serde_json::{Value, json};

use crate::harness::TestAgent;

/// A batch `exec` job of one task mounting `data` at `/data` and the read-only `ro` at
/// `/ro`, asking for one mock device, running `script`.
fn job(id: &str, data_source: &str, script: &str) -> Value {
    json!({ "ID": id, "Type": "batch", "TaskGroups": [{ "Name": "g",
        "RestartPolicy": { "Attempts": 0, "Mode": "fail" },
        "ReschedulePolicy": { "Attempts": 0, "Unlimited": false },
        "Volumes": {
            "data": { "Type": "host", "Source": data_source },
            "ro": { "Type": "host", "Source": "ro", "ReadOnly": true },
        },
        "Tasks": [{ "Name": "t", "Driver": "exec",
            "Config": { "command": "/bin/sh", "args": ["-c", script] },
            "VolumeMounts": [
                { "Volume": "data", "Destination": "/data" },
                { "Volume": "ro", "Destination": "/ro" },
            ],
            "Resources": { "CPU": 50, "MemoryMB": 32,
                "Devices": [{ "Name": "paddock/mock", "Count": 1 }] } }] }] })
}

fn stdout(t: &TestAgent, alloc: &Value) -> String {
    let path = t
        .agent
        .alloc_root()
        .join(alloc["ID"].as_str().unwrap())
        .join("alloc/logs/t.stdout.0");
    std::fs::read_to_string(path).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_volumes_outlive_allocations_are_read_only_when_asked_and_place_only_where_they_are() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, ro) = (tmp.path().join("data"), tmp.path().join("ro"));
    for d in [&data, &ro] {
        std::fs::create_dir(d).unwrap();
    }
    // The task runs as nobody: the operator lets it write the volume.
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(ro.join("seed"), "seeded\n").unwrap();
    let volumes = |extra: &str| {
        format!(
            "client {{\n  host_volume \"data\" {{\n    path = {:?}\n  }}\n  host_volume \"ro\" {{\n    path      = {:?}\n    read_only = true\n  }}\n{extra}}}\n",
            data.display().to_string(),
            ro.display().to_string()
        )
    };
    let t = TestAgent::start(&volumes(""), vec![]).await;
    let node = t.get("/v1/node/self").await;
    let hv = &node["HostVolumes"];
    assert_eq!(hv["data"]["Path"], data.display().to_string(), "{hv:#}");
    assert_eq!(
        (&hv["data"]["ReadOnly"], &hv["ro"]["ReadOnly"]),
        (&json!(false), &json!(true))
    );

    // The first allocation writes to the volume, sees the read-only one refuse a write,
    // and finds its reserved device node in its /dev.
    let write = "echo from-the-first > /data/note && echo wrote; cat /ro/seed; \
                 (echo x > /ro/x) 2>/dev/null || echo ro-refused; \
                 test -c /dev/mock-mock-0 && echo device-node; test -c /dev/null && echo null";
    t.register(job("vol", "data", write)).await;
    let a = t.finished_alloc("vol").await;
    let out = stdout(&t, &a);
    assert_eq!(a["ClientStatus"], "complete", "{out}\n{a:#}");
    for line in ["wrote", "seeded", "ro-refused", "device-node", "null"] {
        assert!(out.lines().any(|l| l == line), "no {line:?} in {out:?}");
    }
    assert!(!ro.join("x").exists(), "a read-only volume was written");
    assert_eq!(
        std::fs::read_to_string(data.join("note")).unwrap(),
        "from-the-first\n"
    );

    // The job's next allocation reads what the first left.
    t.register(job("vol", "data", "cat /data/note")).await;
    let allocs = t
        .wait_allocs("vol", std::time::Duration::from_secs(30), |al| {
            al.len() == 2 && crate::harness::all_terminal(al)
        })
        .await;
    let second = allocs
        .iter()
        .find(|x| x["ID"] != a["ID"])
        .unwrap_or_else(|| panic!("{allocs:#?}"));
    let second = t
        .get(&format!(
            "/v1/allocation/{}",
            second["ID"].as_str().unwrap()
        ))
        .await;
    assert_eq!(stdout(&t, &second), "from-the-first\n", "{second:#}");

    // A volume the node lacks: not placed, Nomad's reason naming it; a reload that adds it
    // places the blocked job.
    let eval = t.register(job("needs", "scratch", "echo placed")).await;
    let filtered = &eval["FailedTGAllocs"]["g"]["ConstraintFiltered"];
    assert_eq!(
        filtered["missing compatible host volumes: \"scratch\""], 1,
        "{eval:#}"
    );
    let scratch = tmp.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    std::fs::set_permissions(&scratch, std::fs::Permissions::from_mode(0o777)).unwrap();
    let extra = format!(
        "  host_volume \"scratch\" {{\n    path = {:?}\n  }}\n",
        scratch.display().to_string()
    );
    std::fs::write(t._dir.path().join("test.hcl"), volumes(&extra)).unwrap();
    let r = t.http.post(t.url("/v1/agent/reload")).send().await.unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    assert_eq!(
        t.get("/v1/node/self").await["HostVolumes"]["scratch"]["Path"],
        scratch.display().to_string()
    );
    let a = t.finished_alloc("needs").await;
    assert!(stdout(&t, &a).contains("placed"), "{a:#}");

    // A volume mount naming no group volume is refused at registration, naming the field.
    let mut bad = job("bad", "data", "true");
    bad["TaskGroups"][0]["Tasks"][0]["VolumeMounts"][0]["Volume"] = json!("dta");
    let (status, body) = t.post("/v1/jobs", json!({ "Job": bad })).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.to_string()
            .contains("Job.TaskGroups[0].Tasks[0].VolumeMounts[0].Volume"),
        "{body}"
    );
}
