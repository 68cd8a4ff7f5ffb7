//! `alloc exec` plans a hostile driver hands the host: a process it did not start or that
//! is not isolated to join, a program outside its grant, a loader variable, a working dir
//! of its choosing, a session's state and output past their bounds. Each is refused with
//! the reason on the socket's close frame, and nothing it asked for runs.

use serde_json::json;

use super::{agent, job};
use crate::alloc_exec::{open_at, read};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drivers_exec_plan_is_checked_like_its_processes() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let a = agent(&root, "", "").await;
    // The hostile task: a granted script, a plain (not isolated) process.
    let script = root.join("allowed/sleeper");
    std::fs::write(&script, "#!/bin/sh\nexec sleep 600\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let echo = root.join("allowed/echo");
    std::fs::write(&echo, "#!/bin/sh\necho exec-ran \"$@\"\n").unwrap();
    std::fs::set_permissions(&echo, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    a.post_job(job(
        "h",
        "hostile",
        json!({ "spawn": script.display().to_string() }),
    ))
    .await;
    let allocs = a
        .wait_allocs("h", |v| v.iter().any(|a| a["ClientStatus"] == "running"))
        .await;
    let alloc = allocs[0]["ID"].as_str().unwrap().to_string();
    let base = a.url("");
    let marker = root.join("ran");
    let m = marker.display().to_string();
    let run = |cmd: Vec<String>| {
        let (base, alloc) = (base.clone(), alloc.clone());
        async move {
            let argv: Vec<&str> = cmd.iter().map(String::as_str).collect();
            let mut ws = open_at(&base, &alloc, "t", &argv, false).await;
            read(&mut ws, |_| false).await
        }
    };
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();

    // The control: a granted program, in the task dir, runs and is heard.
    let seen = run(s(&["spawn", &echo.display().to_string(), "ok"])).await;
    assert_eq!(
        (seen.stdout.as_str(), seen.exit),
        ("exec-ran ok\n", Some(0)),
        "{seen:?}"
    );

    for (attack, says) in [
        (s(&["spawn", "/usr/bin/touch", &m]), "may not run"),
        (s(&["preload", "/usr/bin/sleep", "0"]), "LD_PRELOAD"),
        (s(&["cwd", "/etc", "/usr/bin/sleep", "0"]), "cwd"),
        (s(&["join", "4242", "/usr/bin/touch", &m]), "may not run"),
        // Granted programs, so what decides is the process joined.
        (s(&["join-own", "/usr/bin/sleep", "0"]), "not isolated"),
        (
            s(&["join", "4242", "/usr/bin/sleep", "0"]),
            "no process with id 4242",
        ),
        (s(&["state", "100000"]), "exec-output.state"),
        (s(&["output", "2000000"]), "exec-output.stdout"),
    ] {
        let seen = run(attack.clone()).await;
        let (code, reason) = seen
            .close
            .clone()
            .unwrap_or_else(|| panic!("{attack:?} was not refused: {seen:?}"));
        assert_eq!(code, 1008, "{attack:?}: {seen:?}");
        assert!(reason.contains(says), "{attack:?}: {reason}");
        assert!(
            seen.exit.is_none() && seen.stdout.is_empty(),
            "{attack:?}: {seen:?}"
        );
    }
    assert!(!marker.exists(), "a refused plan ran");
    // The task itself is untouched.
    let alloc_now = a.get(&format!("/v1/allocation/{alloc}")).await;
    assert_eq!(alloc_now["ClientStatus"], "running", "{alloc_now:#}");
}
