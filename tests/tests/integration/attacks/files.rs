//! Links a task or a hook leaves in its folders, which the host (root) then meets: an
//! `exec` task's in the alloc dir it owns (hole 4), a `task_dir` hook's, relative as a
//! guest writes them, in the task dir and the logs (hole 6).

use serde_json::json;

use super::{agent, eventually, failed_saying, finished, job, root_only, task_log};

/// Hole 4: an `exec` task (as `nobody`, in its chroot) links a root-only file of the host
/// as its next stderr log file and as the log file its output rotates into. The logs
/// endpoint does not read through the link, and the executor (root) does not write
/// through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_an_exec_task_plants_in_its_logs_are_neither_read_nor_written() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let a = agent(&root, "", "").await;
    let secret = root_only(&root.join("secret"), "root-only-secret\n");
    let victim = root_only(&root.join("victim"), "untouched\n");
    let script = format!(
        "ln -s {secret} /alloc/logs/t.stderr.99; ln -s {victim} /alloc/logs/t.stdout.1; \
         echo planted; head -c 1500000 /dev/zero | tr '\\0' x; echo; sleep 1",
        secret = secret.display(),
        victim = victim.display()
    );
    a.post_job(job(
        "plant",
        "exec",
        json!({ "command": "/bin/sh", "args": ["-c", script] }),
    ))
    .await;
    let al = finished(&a, "plant").await;
    assert_eq!(al["ClientStatus"], "complete", "{}", super::events(&al));
    let id = al["ID"].as_str().unwrap();
    for kind in ["stderr", "stdout"] {
        let text = task_log(&a, id, kind).await;
        assert!(!text.contains("root-only-secret"), "{kind}: read through");
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched\n");
    assert_eq!(
        std::fs::read_to_string(&secret).unwrap(),
        "root-only-secret\n"
    );
    // The output that rotated went to a file of the task's own in place of the link.
    let logs = root.join("data/alloc").join(id).join("alloc/logs");
    assert!(
        std::fs::symlink_metadata(logs.join("t.stdout.1"))
            .unwrap()
            .is_file()
    );
}

/// Hole 6: a hook with the `task_dir` grant plants relative links — the task's stderr log
/// to a host file, its `secrets` folder to a host folder — that it cannot follow itself.
/// The task's output does not reach the host file; the next start's task-dir setup
/// refuses the linked folder, naming it, and changes nothing outside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_a_hook_plants_are_never_followed_by_the_host() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let a = agent(&root, "", "").await;
    let victim = root_only(&root.join("victim"), "untouched\n");
    let outside = root.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o755)).unwrap();
    // From <root>/data/alloc/<id>/alloc/logs and <root>/data/alloc/<id>/t.
    let plant = serde_json::to_string(&[
        ("/alloc/logs/t.stderr.0", "../../../../../victim"),
        ("/task/secrets", "../../../../outside"),
    ])
    .unwrap();
    // A task that fails (sleep's usage on stderr) and is started again once.
    let mut j = job(
        "hooked",
        "raw_exec",
        json!({ "command": "/usr/bin/sleep", "args": ["not-a-number"] }),
    );
    j["TaskGroups"][0]["RestartPolicy"] = json!({ "Attempts": 1, "Interval": 60_000_000_000u64, "Delay": 100_000_000u64, "Mode": "fail" });
    j["Meta"] = json!({ "paddock.hooks": "hostile-hook", "hostile.plant": plant });
    a.post_job(j).await;
    let al = finished(&a, "hooked").await;
    failed_saying(&al, "failed to build task directory");
    failed_saying(&al, "not followed");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched\n");
    let mode = std::fs::metadata(&outside).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755, "the folder outside was chmod'ed");
    // The first run's stderr went to a file of the task's own.
    let id = al["ID"].as_str().unwrap().to_string();
    eventually("the task's stderr is readable", async || {
        task_log(&a, &id, "stderr").await.contains("sleep")
    })
    .await;

    // `artifacts.set-mode` (contract 0.1.2), the host changing modes for a hook: through a
    // link the hook planted, up with `..`, outside its two folders, or set-uid, the host
    // refuses each and the victim keeps its mode.
    let plant = serde_json::to_string(&[("/task/local/victim", "../../../../../victim")]).unwrap();
    let chmod = serde_json::to_string(&[
        ("/task/local/victim", "777"),
        ("/task/../../../../victim", "777"),
        ("/etc/shadow", "644"),
        ("/task/local", "4777"),
    ])
    .unwrap();
    let mut j = job(
        "chmodder",
        "raw_exec",
        json!({ "command": "/usr/bin/sleep", "args": ["0"] }),
    );
    j["Meta"] = json!({ "paddock.hooks": "hostile-hook", "hostile.plant": plant,
        "hostile.chmod": chmod });
    a.post_job(j).await;
    let al = finished(&a, "chmodder").await;
    let said = super::events(&al);
    assert!(
        !said.contains("changed"),
        "the host changed a mode:\n{said}"
    );
    for path in [
        "/task/local/victim",
        "/task/../../../../victim",
        "/etc/shadow",
        "/task/local",
    ] {
        assert!(
            said.contains(&format!("{path}: HostError::Denied")),
            "{path} not denied:\n{said}"
        );
    }
    let mode = std::fs::metadata(&victim).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o600, "the victim's mode changed");
}

/// The compile cache holds native code the agent loads without validation: a cache folder
/// another user could write (or a link to one) is refused at start, naming why, and the
/// agent does not run.
#[test]
fn a_compile_cache_others_can_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let open = dir.path().join("open-cache");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let link = dir.path().join("linked-cache");
    std::os::unix::fs::symlink(&open, &link).unwrap();
    for (cache, why) in [
        (&open, "writable by its group or others"),
        (&link, "not a folder"),
    ] {
        let out = std::process::Command::new(crate::harness::agent_bin())
            .args(["run", "--dev", "--bind", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data"))
            .arg("--cache-dir")
            .arg(cache)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "started with {}: {err}",
            cache.display()
        );
        assert!(err.contains("compile cache") && err.contains(why), "{err}");
    }
}
