//! `artifact` blocks fetched by the built-in `artifact` hook (a WebAssembly component): from
//! a real HTTP server on loopback, archives made by the system's `tar` and Python's
//! `tarfile`, digests by `sha256sum`, so nothing here checks our code against itself.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::harness::{TestAgent, stdout_of};

/// A file server on 127.0.0.1: each GET of `/<name>` answers the file's bytes (404 for
/// others); each request's head is kept, for the headers the hook sent.
struct Files {
    port: u16,
    heads: Arc<Mutex<Vec<String>>>,
}

async fn serve(files: BTreeMap<String, Vec<u8>>) -> Files {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    let files = Arc::new(files);
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let (files, seen) = (files.clone(), seen.clone());
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let path = head.split(' ').nth(1).unwrap_or("/").to_string();
                seen.lock().unwrap().push(head);
                let (status, body) = match files.get(path.trim_start_matches('/')) {
                    Some(b) => ("200 OK", b.clone()),
                    None => ("404 Not Found", b"no such file".to_vec()),
                };
                let reply = format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = sock.write_all(reply.as_bytes()).await;
                let _ = sock.write_all(&body).await;
            });
        }
    });
    Files { port, heads }
}

fn run(cmd: &mut std::process::Command) -> Vec<u8> {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `app.tar.gz` made by the system's `tar`: `bin/hello`, executable, printing a greeting.
fn app_tarball(dir: &Path) -> Vec<u8> {
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("bin")).unwrap();
    let hello = src.join("bin/hello");
    std::fs::write(&hello, "#!/bin/sh\necho hello from the artifact\n").unwrap();
    run(std::process::Command::new("chmod").arg("755").arg(&hello));
    let out = dir.join("app.tar.gz");
    run(std::process::Command::new("tar")
        .arg("czf")
        .arg(&out)
        .arg("-C")
        .arg(&src)
        .arg("bin"));
    std::fs::read(out).unwrap()
}

/// A tar.gz holding `../escape`, made by Python's `tarfile` (GNU tar strips `..`).
fn evil_tarball(dir: &Path) -> Vec<u8> {
    let out = dir.join("evil.tar.gz");
    let script = format!(
        "import io, tarfile\n\
         with tarfile.open({:?}, 'w:gz') as t:\n\
         \x20   for name in ['fine', '../escape']:\n\
         \x20       i = tarfile.TarInfo(name); i.size = 2\n\
         \x20       t.addfile(i, io.BytesIO(b'x\\n'))\n",
        out.display().to_string()
    );
    run(std::process::Command::new("python3").args(["-c", &script]));
    std::fs::read(out).unwrap()
}

fn sha256(bytes: &[u8], dir: &Path) -> String {
    let f = dir.join("digest-me");
    std::fs::write(&f, bytes).unwrap();
    let out = run(std::process::Command::new("sha256sum").arg(&f));
    String::from_utf8(out).unwrap()[..64].to_string()
}

/// A batch raw_exec job that runs `command` after fetching `artifact`, failing for good at
/// the first failure (no restart, no reschedule).
fn job(id: &str, artifact: Value, command: &str) -> Value {
    json!({ "ID": id, "Type": "batch", "TaskGroups": [{ "Name": "g",
        "RestartPolicy": { "Attempts": 0, "Mode": "fail" },
        "ReschedulePolicy": { "Attempts": 0, "Unlimited": false },
        "Tasks": [{ "Name": "t", "Driver": "raw_exec", "Artifacts": [artifact],
            "Config": { "command": command },
            "Resources": { "CPU": 20, "MemoryMB": 32 } }] }] })
}

/// The event of `kind` of task `t` in a finished allocation.
fn event<'a>(alloc: &'a Value, kind: &str) -> &'a Value {
    let events = alloc["TaskStates"]["t"]["Events"].as_array().unwrap();
    events
        .iter()
        .find(|e| e["Type"] == kind)
        .unwrap_or_else(|| panic!("no {kind:?} in {events:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifacts_are_fetched_checked_and_unpacked_by_the_sandboxed_hook() {
    let tmp = tempfile::tempdir().unwrap();
    let app = app_tarball(tmp.path());
    let digest = sha256(&app, tmp.path());
    let files = serve(BTreeMap::from([
        ("app.tar.gz".to_string(), app),
        ("evil.tar.gz".to_string(), evil_tarball(tmp.path())),
    ]))
    .await;
    let url = |name: &str| format!("http://127.0.0.1:{}/{name}", files.port);
    // Dev mode: the built-in hook has every grant, loopback among its network hosts.
    let t = TestAgent::start("", vec![]).await;

    // The binary arrives in a tar.gz with its checksum, keeps its mode, and runs.
    t.register(job(
        "app",
        json!({ "GetterSource": url("app.tar.gz"), "RelativeDest": "local/",
            "GetterOptions": { "checksum": format!("sha256:{digest}") },
            "GetterHeaders": { "X-Token": "t0ken" } }),
        "${NOMAD_TASK_DIR}/bin/hello",
    ))
    .await;
    let (alloc, out) = stdout_of(&t, "app").await;
    assert_eq!(out, "hello from the artifact\n", "{alloc:#}");
    assert_eq!(alloc["ClientStatus"], "complete");
    event(&alloc, "Downloading Artifacts");
    let heads = files.heads.lock().unwrap().clone();
    assert!(
        heads
            .iter()
            .any(|h| h.starts_with("GET /app.tar.gz ") && h.contains("x-token: t0ken")),
        "{heads:?}"
    );

    // A wrong checksum: `Failed Artifact Download` naming both digests, and nothing left.
    let wrong = format!("sha256:{}", "0".repeat(64));
    t.register(job(
        "wrong",
        json!({ "GetterSource": url("app.tar.gz"), "GetterOptions": { "checksum": wrong } }),
        "${NOMAD_TASK_DIR}/bin/hello",
    ))
    .await;
    let alloc = t.finished_alloc("wrong").await;
    assert_eq!(alloc["ClientStatus"], "failed");
    let failed = event(&alloc, "Failed Artifact Download");
    let why = failed["DownloadError"].as_str().unwrap();
    assert!(why.contains(&wrong) && why.contains(&digest), "{failed:#}");
    let id = alloc["ID"].as_str().unwrap();
    let local = t.agent.alloc_root().join(id).join("t/local");
    let left: Vec<_> = std::fs::read_dir(&local)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");

    // An archive holding `../escape`: refused whole, nothing written anywhere.
    t.register(job(
        "evil",
        json!({ "GetterSource": url("evil.tar.gz"), "RelativeDest": "local/x" }),
        "/bin/true",
    ))
    .await;
    let alloc = t.finished_alloc("evil").await;
    let failed = event(&alloc, "Failed Artifact Download");
    assert!(
        failed["DownloadError"]
            .as_str()
            .unwrap()
            .contains("\"../escape\" climbs out"),
        "{failed:#}"
    );
    let task_dir = t
        .agent
        .alloc_root()
        .join(alloc["ID"].as_str().unwrap())
        .join("t");
    assert!(!task_dir.join("local/x").exists() && !task_dir.join("local/escape").exists());

    // Without the network grant the host refuses the request, naming the grant.
    std::fs::write(
        t._dir.path().join("test.hcl"),
        "plugin \"artifact\" {\n  grant {\n    task_dir = true\n  }\n}\n",
    )
    .unwrap();
    let r = t.http.post(t.url("/v1/agent/reload")).send().await.unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    t.register(job(
        "nogrant",
        json!({ "GetterSource": url("app.tar.gz") }),
        "/bin/true",
    ))
    .await;
    let alloc = t.finished_alloc("nogrant").await;
    let failed = event(&alloc, "Failed Artifact Download");
    let why = failed["DownloadError"].as_str().unwrap();
    assert!(
        why.contains("`network` grant") && why.contains(&format!("127.0.0.1:{}", files.port)),
        "{failed:#}"
    );
}
