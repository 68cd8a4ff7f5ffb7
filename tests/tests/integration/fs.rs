//! `/v1/client/fs/*` over HTTP: logs plain, framed and followed; ls, stat, cat, readat; and
//! every way out of the allocation dir refused.

use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use crate::harness::{TestAgent, stdout_of};

fn sh_job(id: &str, script: &str) -> Value {
    json!({ "ID": id, "Type": "batch", "TaskGroups": [{ "Name": "g", "RestartPolicy": { "Attempts": 0 },
        "Tasks": [{ "Name": "t", "Driver": "raw_exec",
            "Config": { "command": "/bin/sh", "args": ["-c", script] } }] }] })
}

/// Decode Nomad's framed stream: JSON objects back to back.
fn frames(body: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(body)
        .into_iter::<Value>()
        .map(|v| v.unwrap())
        .collect()
}

fn frames_text(body: &str) -> String {
    frames(body)
        .iter()
        .filter_map(|f| f["Data"].as_str())
        .map(|d| {
            String::from_utf8(base64::engine::general_purpose::STANDARD.decode(d).unwrap()).unwrap()
        })
        .collect()
}

#[tokio::test]
async fn logs_files_and_escapes() {
    let t = TestAgent::start("", vec![]).await;
    t.post_job(sh_job(
        "fsjob",
        "for i in 1 2 3; do echo line $i; done; echo oops >&2; echo data > local/file.txt; ln -s /etc local/etc; ln -s ../../../../ local/up",
    ))
    .await;
    let (a, out) = stdout_of(&t, "fsjob").await;
    assert_eq!(out, "line 1\nline 2\nline 3\n");
    let id = a["ID"].as_str().unwrap();
    let get = |path: String| {
        let http = t.http.clone();
        let url = t.url(&path);
        async move {
            let r = http.get(url).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };

    // Plain and framed logs, from the start and from the end.
    let (s, body) = get(format!(
        "/v1/client/fs/logs/{id}?task=t&type=stdout&plain=true"
    ))
    .await;
    assert_eq!((s, body.as_str()), (200, "line 1\nline 2\nline 3\n"));
    let (_, body) = get(format!(
        "/v1/client/fs/logs/{id}?task=t&type=stdout&plain=true&origin=end&offset=7"
    ))
    .await;
    assert_eq!(body, "line 3\n");
    let (s, body) = get(format!("/v1/client/fs/logs/{id}?task=t&type=stderr")).await;
    assert_eq!(s, 200);
    assert_eq!(frames_text(&body), "oops\n");
    assert_eq!(frames(&body)[0]["File"], "alloc/logs/t.stderr.0");
    // Bad requests name what is wrong.
    let (s, body) = get(format!("/v1/client/fs/logs/{id}?task=t&type=both")).await;
    assert_eq!(s, 400, "{body}");
    assert!(body.contains("type"), "{body}");
    let (s, _) = get(format!("/v1/client/fs/logs/{id}?task=nope&type=stdout")).await;
    assert_eq!(s, 404);
    let (s, _) = get("/v1/client/fs/logs/00000000-dead?task=t&type=stdout".into()).await;
    assert_eq!(s, 404);

    // ls, stat, cat, readat.
    let (s, body) = get(format!("/v1/client/fs/ls/{id}?path=/t/local")).await;
    assert_eq!(s, 200, "{body}");
    let ls: Vec<Value> = serde_json::from_str(&body).unwrap();
    let file = ls.iter().find(|e| e["Name"] == "file.txt").unwrap();
    assert_eq!(
        (file["Size"].as_u64(), file["IsDir"].as_bool()),
        (Some(5), Some(false))
    );
    assert!(file["ModTime"].as_str().unwrap().ends_with('Z'));
    let (_, body) = get(format!("/v1/client/fs/stat/{id}?path=t/local/file.txt")).await;
    let st: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(st["Name"], "file.txt");
    assert_eq!(st["FileMode"].as_str().unwrap().len(), 10);
    assert_eq!(
        get(format!("/v1/client/fs/cat/{id}?path=t/local/file.txt"))
            .await
            .1,
        "data\n"
    );
    assert_eq!(
        get(format!(
            "/v1/client/fs/readat/{id}?path=t/local/file.txt&offset=1&limit=2"
        ))
        .await
        .1,
        "at"
    );

    // Every way out is refused before anything is read.
    for bad in [
        "../../",
        "t/local/../../../x",
        "t/local/etc/passwd",
        "t/local/etc",
        "t/local/up/state.redb",
    ] {
        for ep in ["cat", "ls", "stat", "readat"] {
            let (s, body) = get(format!("/v1/client/fs/{ep}/{id}?path={bad}")).await;
            assert_eq!(s, 400, "{ep} {bad}: {body}");
            assert!(
                body.contains("escapes the allocation directory"),
                "{ep} {bad}: {body}"
            );
        }
    }
    // An absolute path is taken inside the allocation dir, never from the host's root.
    let (s, _) = get(format!("/v1/client/fs/cat/{id}?path=/etc/passwd")).await;
    assert_eq!(s, 404);
}

#[tokio::test]
async fn following_logs_streams_output_as_it_comes_and_ends_with_the_task() {
    let t = TestAgent::start("", vec![]).await;
    t.post_job(sh_job(
        "follow",
        "for i in 1 2 3 4 5 6 7 8; do echo tick $i; sleep 0.25; done",
    ))
    .await;
    let allocs = t
        .wait_allocs("follow", Duration::from_secs(20), |a| {
            a.len() == 1 && a[0]["TaskStates"]["t"]["State"] == "running"
        })
        .await;
    let id = allocs[0]["ID"].as_str().unwrap();
    let started = std::time::Instant::now();
    let body = tokio::time::timeout(
        Duration::from_secs(20),
        t.http
            .get(t.url(&format!(
                "/v1/client/fs/logs/{id}?task=t&type=stdout&follow=true"
            )))
            .send()
            .await
            .unwrap()
            .text(),
    )
    .await
    .expect("a followed stream ends when the task is dead")
    .unwrap();
    assert_eq!(
        frames_text(&body),
        (1..=8).map(|i| format!("tick {i}\n")).collect::<String>()
    );
    // It waited for the output rather than returning what was there at first.
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
    assert!(
        frames(&body).len() >= 2,
        "output came in more than one frame"
    );
}

/// `client { alloc_dir }`: allocation files live there (and the fs API reads them there),
/// the node's storage attributes describe that filesystem, and the data dir holds none.
#[tokio::test]
async fn an_alloc_dir_of_its_own_holds_every_allocation_file() {
    let allocs = tempfile::tempdir().unwrap();
    let alloc_dir = allocs.path().join("allocs");
    let t = TestAgent::start(
        &format!(
            "client {{\n  alloc_dir = {:?}\n}}\n",
            alloc_dir.display().to_string()
        ),
        vec![],
    )
    .await;
    t.post_job(sh_job("owndir", "echo hello; echo data > local/file.txt"))
        .await;
    let (a, out) = stdout_of(&t, "owndir").await;
    assert_eq!(out, "hello\n");
    let id = a["ID"].as_str().unwrap();
    assert_eq!(
        std::fs::read_to_string(alloc_dir.join(id).join("t/local/file.txt")).unwrap(),
        "data\n"
    );
    assert!(
        alloc_dir.join(id).join("alloc/logs/t.stdout.0").is_file(),
        "the task's logs are in the alloc dir"
    );
    assert!(
        !t.agent.data_dir().join("alloc").join(id).exists(),
        "nothing of the allocation is in the data dir"
    );
    let r = t
        .http
        .get(t.url(&format!("/v1/client/fs/cat/{id}?path=/t/local/file.txt")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), "data\n");
    let nodes = t.get("/v1/nodes").await;
    let node = t
        .get(&format!("/v1/node/{}", nodes[0]["ID"].as_str().unwrap()))
        .await;
    assert_eq!(
        node["Attributes"]["unique.storage.volume"],
        alloc_dir.display().to_string()
    );

    // A relative path is refused at start, naming the key.
    let config = paddock::config::AgentConfig::parse(
        "client {\n  alloc_dir = \"relative/allocs\"\n}\n",
        "test.hcl",
    )
    .unwrap();
    let data = tempfile::tempdir().unwrap();
    let err = paddock::agent::Agent::start(paddock::agent::AgentOptions {
        data_dir: Some(data.path().to_path_buf()),
        dev: true,
        config,
        ..Default::default()
    })
    .await
    .err()
    .expect("a relative alloc_dir is refused");
    assert!(
        format!("{err:#}").contains("client.alloc_dir: must be an absolute path"),
        "{err:#}"
    );
}
