//! What a guest hands `process.spawn` and `process.spawn-isolated`: its env (holes 1 and 7),
//! output paths and working dirs (2), the isolation (3), the user (8), and what the
//! isolated task itself may do (capabilities, `mknod`, processes).

use std::os::unix::fs::{MetadataExt, symlink};
use std::time::Duration;

use serde_json::json;

use super::{agent, failed_saying, finished, hex, job, preload_library, root_only};

/// Hole 1: a library written into the task's own log, then a granted program started with
/// `LD_PRELOAD` naming it (the driver's way and the job submitter's); hole 7: a hook that
/// writes the library into the alloc dir and returns `LD_PRELOAD`. The payload writes a
/// marker when it runs: it never does. A loader variable the grant names still passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_program_never_loads_a_library_of_the_guests_or_the_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let marker = root.join("payload-ran");
    let library = preload_library(&root, &marker);
    let so = root.join("payload.so");
    let a = agent(&root, "", "").await;

    // The driver: the library into its stderr log, then the granted sleep with LD_PRELOAD.
    a.post_job(job(
        "driver-preload",
        "hostile",
        json!({ "preload": { "library_hex": hex(&library), "program": "/usr/bin/sleep" } }),
    ))
    .await;
    // The job submitter: raw_exec's granted sleep with LD_PRELOAD in the task's env.
    let mut submitted = job(
        "job-preload",
        "raw_exec",
        json!({ "command": "/usr/bin/sleep", "args": ["0.1"] }),
    );
    submitted["TaskGroups"][0]["Tasks"][0]["Env"] =
        json!({ "LD_PRELOAD": so.display().to_string() });
    a.post_job(submitted).await;
    // The hook: the library into /alloc/data, and LD_PRELOAD in the task's env.
    let mut hooked = job(
        "hook-preload",
        "raw_exec",
        json!({ "command": "/usr/bin/sleep", "args": ["0.1"] }),
    );
    hooked["Meta"] = json!({
        "paddock.hooks": "hostile-hook",
        "hostile.write": serde_json::to_string(&[("/alloc/data/x.so", hex(&library))]).unwrap(),
        "hostile.env": "LD_PRELOAD=/alloc/data/x.so",
    });
    a.post_job(hooked).await;
    // The control: a loader variable the operator granted (`loader_env`) passes.
    let mut granted = job(
        "granted",
        "raw_exec",
        json!({ "command": "/usr/bin/sleep", "args": ["0.1"] }),
    );
    granted["TaskGroups"][0]["Tasks"][0]["Env"] = json!({ "LD_LIBRARY_PATH": "/nonexistent" });
    a.post_job(granted).await;

    failed_saying(
        &finished(&a, "driver-preload").await,
        "component \"hostile\" may not pass LD_PRELOAD to a process",
    );
    failed_saying(
        &finished(&a, "job-preload").await,
        "component \"raw_exec\" may not pass LD_PRELOAD to a process",
    );
    failed_saying(
        &finished(&a, "hook-preload").await,
        "hook \"hostile-hook\" may not set LD_PRELOAD in a task's environment",
    );
    let ok = finished(&a, "granted").await;
    assert_eq!(ok["ClientStatus"], "complete", "{}", super::events(&ok));
    assert!(
        !marker.exists(),
        "the payload ran: {}",
        std::fs::read_to_string(&marker).unwrap_or_default()
    );
}

/// Hole 2: a granted program's output sent to the agent's state DB, opened by the root
/// executor. Refused before anything opens it; the agent restarts on its state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_cannot_name_the_file_a_process_writes_to() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let mut a = agent(&root, "", "").await;
    let state = root.join("data/state.redb");
    let victim = root_only(&root.join("victim"), "untouched\n");
    for (id, target) in [("state", &state), ("victim", &victim)] {
        a.post_job(job(
            id,
            "hostile",
            json!({ "output_to": ["/usr/bin/sleep", target.display().to_string()] }),
        ))
        .await;
    }
    for id in ["state", "victim"] {
        failed_saying(
            &finished(&a, id).await,
            "stdout-path: component \"hostile\" may send a process's output only to the task's own logs",
        );
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched\n");
    assert!(
        !String::from_utf8_lossy(&std::fs::read(&state).unwrap()).contains("Usage: sleep"),
        "sleep's help went into the state DB"
    );
    // The state DB is whole: the agent comes back on it and still knows the jobs.
    a.kill9();
    a.start().await;
    let jobs = a.get("/v1/jobs").await;
    assert_eq!(jobs.as_array().unwrap().len(), 2, "{jobs:#}");
}

/// Hole 3: `spawn-isolated` with the guest's choice of everything: no chroot (it ran on the
/// host, where a link in the allowed folder led to a shell), the host's `/` as the chroot
/// with `dash` bound over the allowed `sleep` as root without no_new_privs, a host folder
/// of the guest's as the chroot (the executor chowned it). Each is refused; nothing runs,
/// nothing is chowned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolation_is_the_hosts_choice_not_the_guests() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let a = agent(&root, "", "").await;
    let marker = root.join("shell-ran");
    symlink("/bin/sh", root.join("allowed/escape")).unwrap();
    let victim = root.join("victim-dir");
    std::fs::create_dir_all(&victim).unwrap();
    let touch = vec!["-c".to_string(), format!("touch {}", marker.display())];
    let iso = |program: String, chroot: &str, binds: serde_json::Value, user: &str, nnp: bool| {
        json!({ "isolate": { "program": program, "args": touch, "chroot": chroot,
            "binds": binds, "user": user, "no_new_privs": nnp } })
    };
    let dash_over_sleep = json!([["/usr/bin/dash", "/usr/bin/sleep", true]]);
    let attacks = [
        (
            "no-chroot",
            iso(
                format!("{}/allowed/escape", root.display()),
                "",
                json!([]),
                "",
                true,
            ),
            "is neither in the chroot".to_string(),
        ),
        (
            "host-root",
            iso("/usr/bin/sleep".into(), "/", dash_over_sleep.clone(), "0", false),
            "isolation.chroot: an isolated process of component \"hostile\" is rooted at its own task dir"
                .into(),
        ),
        (
            "dash-bind",
            iso("/usr/bin/sleep".into(), "", dash_over_sleep, "", true),
            "isolation.binds: component \"hostile\" may not bind \"/usr/bin/dash\"".into(),
        ),
        (
            "no-nnp",
            iso("/usr/bin/sleep".into(), "", json!([]), "", false),
            "isolation.no-new-privs".into(),
        ),
        (
            "chown-victim",
            iso(
                "/usr/bin/sleep".into(),
                &victim.display().to_string(),
                json!([]),
                "nobody",
                true,
            ),
            "isolation.chroot".into(),
        ),
        (
            "root-user",
            iso("/usr/bin/sleep".into(), "", json!([]), "root", true),
            "user: running as uid 0 (\"root\") is disallowed".into(),
        ),
        (
            "uid-0",
            iso("/usr/bin/sleep".into(), "", json!([]), "0", true),
            "user: running as uid 0 (\"0\") is disallowed".into(),
        ),
    ];
    for (id, config, _) in &attacks {
        a.post_job(job(id, "hostile", config.clone())).await;
    }
    // Hole 8: the exec driver as root, by name and by number.
    for (id, user) in [("exec-root", "root"), ("exec-uid-0", "0")] {
        let mut j = job(
            id,
            "exec",
            json!({ "command": "/bin/sh", "args": ["-c", format!("touch {}", marker.display())] }),
        );
        j["TaskGroups"][0]["Tasks"][0]["User"] = json!(user);
        a.post_job(j).await;
    }
    for (id, _, want) in &attacks {
        failed_saying(&finished(&a, id).await, want);
    }
    for (id, user) in [("exec-root", "root"), ("exec-uid-0", "0")] {
        failed_saying(
            &finished(&a, id).await,
            &format!("user: running as uid 0 ({user:?}) is disallowed"),
        );
    }
    assert!(!marker.exists(), "a shell ran");
    let meta = std::fs::metadata(&victim).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid()),
        (0, 0),
        "the victim folder was chowned"
    );
}

/// The exec agent of the two tests below: root allowed (`denied_host_uids = ""`), at most
/// 16 processes per task.
async fn exec_agent(root: &std::path::Path) -> crate::harness::AgentProcess {
    agent(
        root,
        "",
        r#"plugin "exec" {
  grant {
    process          = ["*"]
    isolation        = true
    denied_host_uids = ""
    pids_max         = 16
  }
}"#,
    )
    .await
}

/// What an isolated task gets when the operator lets it run as root
/// (`denied_host_uids = ""`): no capability, so no `mknod`, no mount, no way back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_task_holds_no_capability() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let a = exec_agent(&root).await;
    let mut as_root = job(
        "as-root",
        "exec",
        json!({ "command": "/bin/sh", "args": ["-c",
            "id -u; grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status; \
             mknod /tmp/null c 1 3 && echo MKNOD-DONE; \
             mount -t tmpfs none /tmp && echo MOUNT-DONE; true"] }),
    );
    as_root["TaskGroups"][0]["Tasks"][0]["User"] = json!("root");
    a.post_job(as_root).await;
    let al = finished(&a, "as-root").await;
    assert_eq!(al["ClientStatus"], "complete", "{}", super::events(&al));
    let out = a.stdout(al["ID"].as_str().unwrap(), "t").await;
    assert!(out.starts_with("0\n"), "{out}");
    for cap in ["CapEff", "CapPrm", "CapBnd", "CapAmb"] {
        assert!(
            out.contains(&format!("{cap}:\t0000000000000000")),
            "{cap} not empty: {out}"
        );
    }
    assert!(
        !out.contains("MKNOD-DONE") && !out.contains("MOUNT-DONE"),
        "{out}"
    );
}

/// Low: a fork bomb in an isolated task stops at the grant's `pids_max`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_task_s_processes_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let a = exec_agent(&root).await;
    a.post_job(job(
        "fork-bomb",
        "exec",
        json!({ "command": "/bin/sh", "args": ["-c",
            "for i in $(seq 40); do sleep 3 & done; wait; echo forked"] }),
    ))
    .await;
    let bomb = finished(&a, "fork-bomb").await;
    let err = super::task_log(&a, bomb["ID"].as_str().unwrap(), "stderr").await;
    assert!(
        err.contains("fork") || err.contains("Resource temporarily unavailable"),
        "40 processes ran past pids_max 16: {err}"
    );
}

/// A denial names where a link leads only for a path in the grant: `/proc/self/exe` (the
/// agent's binary) is no oracle of the host's files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_says_nothing_of_paths_outside_the_grant() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let a = agent(&root, "", "").await;
    a.post_job(job(
        "oracle",
        "hostile",
        json!({ "spawn": "/proc/self/exe" }),
    ))
    .await;
    let al = finished(&a, "oracle").await;
    failed_saying(&al, "may not run \"/proc/self/exe\"");
    let said = super::events(&al);
    let bin = crate::harness::agent_bin();
    let bin = std::fs::canonicalize(&bin).unwrap_or(bin);
    assert!(
        !said.contains(&bin.display().to_string()) && !said.contains("resolves to"),
        "{said}"
    );
}
