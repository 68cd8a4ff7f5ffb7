use super::*;

#[test]
fn programs_resolve_to_absolute_paths() {
    let env = vec![("PATH".to_string(), "/nonexistent:/bin:/usr/bin".to_string())];
    let sh = resolve_program("sh", &env, "/tmp", |_| true).unwrap();
    assert!(sh == "/bin/sh" || sh == "/usr/bin/sh", "{sh}");
    assert_eq!(
        resolve_program("local/run.sh", &env, "/alloc/t", |_| true).unwrap(),
        "/alloc/t/local/run.sh"
    );
    assert_eq!(
        resolve_program("/bin/true", &env, "", |_| true).unwrap(),
        "/bin/true"
    );
    assert!(matches!(
        resolve_program("no-such-program-here", &env, "", |_| true),
        Err(HostError::Invalid(_))
    ));
}

/// Records what reaches the embedder.
#[derive(Default)]
struct Recorder(std::sync::Mutex<Vec<(String, String)>>);

impl ProcessHost for Recorder {
    fn spawn<'a>(&'a self, owner: &'a str, cmd: Command) -> BoxFuture<'a, Result<u64, HostError>> {
        self.0.lock().unwrap().push((owner.to_string(), cmd.path));
        Box::pin(async { Ok(7) })
    }
    fn signal(&self, _: &str, _: u64, _: &str) -> Result<(), HostError> {
        Ok(())
    }
    fn stop(&self, _: &str, _: u64, _: &str, _: Duration) -> Result<(), HostError> {
        Ok(())
    }
    fn status(&self, _: &str, _: u64) -> Result<ProcessStatus, HostError> {
        Ok(ProcessStatus::Running)
    }
    fn stats(&self, _: &str, _: u64) -> Result<ResourceUsage, HostError> {
        Ok(ResourceUsage::default())
    }
    fn release(&self, _: &str, _: u64) -> Result<(), HostError> {
        Ok(())
    }
}

fn command(path: &str) -> WitCommand {
    WitCommand {
        path: path.into(),
        args: vec![],
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        cwd: String::new(),
        stdout_path: String::new(),
        stderr_path: String::new(),
        logs: None,
        user: String::new(),
    }
}

#[test]
fn only_granted_commands_reach_the_host_and_by_their_absolute_path() {
    let host = Recorder::default();
    let mut component = ComponentContext {
        name: "raw_exec".into(),
        grants: Default::default(),
        plugin_config: "{}".into(),
        limits: Default::default(),
    };
    let denied = futures::executor::block_on(
        Process::new(&component, None, Some(&host)).spawn(command("/bin/true")),
    );
    assert!(matches!(denied, Err(WitHostError::Denied(m)) if m.contains("`process` grant")));

    component.grants.process = vec!["/usr/bin/*".into(), "/bin/*".into()];
    let mut view = Process::new(&component, None, Some(&host));
    assert_eq!(
        futures::executor::block_on(view.spawn(command("true"))).unwrap(),
        7
    );
    let outside = futures::executor::block_on(view.spawn(command("/etc/passwd")));
    assert!(
        matches!(outside, Err(WitHostError::Denied(m)) if m.contains("may not run \"/etc/passwd\""))
    );
    let spawned = host.0.lock().unwrap().clone();
    assert_eq!(spawned.len(), 1, "a refused command never reaches the host");
    assert_eq!(spawned[0].0, "raw_exec");
    assert!(spawned[0].1.ends_with("/true") && spawned[0].1.starts_with('/'));

    let mut no_host = Process::new(&component, None, None);
    assert!(matches!(
        futures::executor::block_on(no_host.status(1)),
        Err(WitHostError::Failed(m)) if m.contains("not available")
    ));
}

#[test]
fn escapes_by_dots_links_and_path_are_refused() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let dir = std::env::temp_dir().join(format!("paddock-escape-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (allowed, outside) = (dir.join("allowed"), dir.join("outside"));
    for d in [&allowed, &outside] {
        std::fs::create_dir_all(d).unwrap();
        let tool = d.join("tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    symlink(outside.join("tool"), allowed.join("escape")).unwrap();
    symlink(allowed.join("tool"), allowed.join("alias")).unwrap();
    let allowed = std::fs::canonicalize(&allowed)
        .unwrap()
        .display()
        .to_string();
    let host = Recorder::default();
    let component = ComponentContext {
        name: "raw_exec".into(),
        grants: crate::Grants {
            process: vec![format!("{allowed}/*")],
            ..Default::default()
        },
        plugin_config: "{}".into(),
        limits: Default::default(),
    };
    // A call about a task whose dir is `dir`, so a working directory there is the task's.
    let task = TaskContext {
        paths: Some(TaskPaths {
            alloc_root: dir.display().to_string(),
            task_dir: dir.display().to_string(),
            alloc_dir: dir.join("alloc").display().to_string(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut view = Process::new(&component, Some(&task), Some(&host));
    let mut spawn = |path: String, path_env: &str, cwd: &str| {
        let mut cmd = command(&path);
        cmd.env = vec![("PATH".into(), path_env.into())];
        cmd.cwd = cwd.into();
        futures::executor::block_on(view.spawn(cmd))
    };
    let denied = |r: Result<u64, WitHostError>, want: &str| match r {
        Err(WitHostError::Denied(m)) => assert!(m.contains(want), "{m}"),
        other => panic!("expected a denial naming {want:?}, got {other:?}"),
    };
    assert_eq!(spawn(format!("{allowed}/tool"), "", "").unwrap(), 7);
    assert_eq!(spawn(format!("{allowed}/alias"), "", "").unwrap(), 7);
    assert_eq!(spawn("tool".into(), &allowed, "").unwrap(), 7);
    let outside_tool = format!("{}/outside/tool", dir.display());
    denied(
        spawn(format!("{allowed}/../outside/tool"), "", ""),
        &outside_tool,
    );
    denied(spawn(format!("{allowed}/escape"), "", ""), "resolves to");
    denied(
        spawn("escape".into(), "allowed", &dir.display().to_string()),
        "resolves to",
    );
    // A `PATH` lookup looks only where the grant allows: outside it, nothing is found.
    match spawn("sh".into(), "/usr/bin:/bin", "") {
        Err(WitHostError::Invalid(m)) => assert!(m.contains("not found in PATH"), "{m}"),
        other => panic!("{other:?}"),
    }
    // A link outside the grant is refused without saying where it leads.
    match spawn("/proc/self/exe".into(), "", "") {
        Err(WitHostError::Denied(m)) => {
            assert!(
                m.contains("may not run \"/proc/self/exe\":") && !m.contains("resolves to"),
                "{m}"
            )
        }
        other => panic!("{other:?}"),
    }
    denied(
        spawn(format!("{allowed}/../../../../../../etc/passwd"), "", ""),
        "\"/etc/passwd\"",
    );
    // A missing file outside the grant is refused without saying whether it exists.
    denied(
        spawn("/no/such/file".into(), "", ""),
        "may not run \"/no/such/file\"",
    );
    let ran = host.0.lock().unwrap().clone();
    let tool = format!("{allowed}/tool");
    assert_eq!(
        ran.iter().map(|(_, p)| p.as_str()).collect::<Vec<_>>(),
        [&tool, &tool, &tool]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn isolation_needs_its_own_grant_besides_process() {
    let host = Recorder::default();
    let mut component = ComponentContext {
        name: "exec".into(),
        grants: crate::Grants {
            process: vec!["*".into()],
            ..Default::default()
        },
        plugin_config: "{}".into(),
        limits: Default::default(),
    };
    let iso = || WitIsolation {
        pid_namespace: true,
        ipc_namespace: true,
        uts_namespace: true,
        chroot: String::new(),
        binds: vec![],
        user: String::new(),
        no_new_privs: true,
        memory_bytes: 32 << 20,
        memory_max_bytes: 0,
        cpu_shares: 100,
        cpuset_cpus: String::new(),
    };
    let mut view = Process::new(&component, None, Some(&host));
    let denied = futures::executor::block_on(view.spawn_isolated(command("true"), iso()));
    assert!(
        matches!(&denied, Err(WitHostError::Denied(m)) if m.contains("`isolation` grant") && m.contains("isolation = true")),
        "{denied:?}"
    );
    assert!(matches!(
        futures::executor::block_on(view.isolation_support()),
        Err(WitHostError::Denied(_))
    ));
    component.grants.isolation = true;
    let task = TaskContext {
        paths: Some(TaskPaths {
            alloc_root: "/a".into(),
            task_dir: "/a/t".into(),
            alloc_dir: "/a/alloc".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut view = Process::new(&component, Some(&task), Some(&host));
    // Granted: the host's answer (this one cannot isolate), not a denial.
    assert!(matches!(
        futures::executor::block_on(view.spawn_isolated(command("true"), iso())),
        Err(WitHostError::Failed(m)) if m.contains("cannot isolate")
    ));
    assert!(host.0.lock().unwrap().is_empty());
}
