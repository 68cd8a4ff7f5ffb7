//! `paddock-nomad-driver` driven as Nomad's client drives an external task driver: the
//! go-plugin handshake, the loader's sequence of launches, then tasks' lives over the
//! `Driver` service, with the mock, raw_exec (output into Nomad's FIFOs, surviving the
//! plugin's death) and a trapping component.

mod nomad;

use std::time::Duration;

use nomad::{inspect, launch, launch_as, plugin_bin, start, task, wait};
use paddock_nomad_driver::proto::base as bpb;
use paddock_nomad_driver::proto::drivers as pb;
use paddock_nomad_driver::proto::hclspec::spec;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_by_hand_it_says_what_it_is_and_exits_1() {
    let out = tokio::process::Command::new(plugin_bin())
        .env_remove(paddock_nomad_driver::handshake::MAGIC_COOKIE_KEY)
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stdout.is_empty(),
        "stdout: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("plugin for Nomad"), "{err}");
    // A wrong cookie is the same.
    let out = tokio::process::Command::new(plugin_bin())
        .env(
            paddock_nomad_driver::handshake::MAGIC_COOKIE_KEY,
            "not-nomad",
        )
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
}

/// Nomad's loader: launch, health, PluginInfo, ConfigSchema, kill; launch again, SetConfig
/// (a bad one is refused naming what is wrong), Shutdown within 2 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loader_sequence_and_the_handshake() {
    let p = launch().await;
    assert!(p.line.starts_with("1|2|unix|"), "{}", p.line);
    assert!(p.line.ends_with("|grpc|"), "{}", p.line);
    let mut health = tonic_health::pb::health_client::HealthClient::new(p.channel.clone());
    let h = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "plugin".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        h.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
    let info = p
        .base()
        .plugin_info(bpb::PluginInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.r#type, bpb::PluginType::Driver as i32);
    assert_eq!(info.plugin_api_versions, ["v0.1.0"]);
    assert_eq!(info.name, "paddock");
    assert_eq!(
        info.plugin_version.split('.').count(),
        3,
        "{}",
        info.plugin_version
    );
    let schema = p
        .base()
        .config_schema(bpb::ConfigSchemaRequest {})
        .await
        .unwrap()
        .into_inner()
        .spec
        .unwrap();
    let Some(spec::Block::Object(root)) = schema.block else {
        panic!("the config schema is an object: {schema:?}")
    };
    for key in ["driver", "components", "grant", "limits", "data_dir"] {
        assert!(
            root.attributes.contains_key(key),
            "{key} in {:?}",
            root.attributes.keys()
        );
    }
    // Nomad's loader ends this first launch with go-plugin's Kill: Shutdown, then a kill
    // 2 s later if need be.
    assert!(p.shutdown(Duration::from_secs(2)).await.success());

    // Older clients ask for version 1.
    let p = launch_as(&plugin_bin(), "1").await;
    assert!(p.line.starts_with("1|1|unix|"), "{}", p.line);
    let data = tempfile::tempdir().unwrap();
    let e = p
        .set_config(&json!({"driver": "no_such_driver", "data_dir": data.path()}))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(
        e.message().contains("no_such_driver") && e.message().contains("mock"),
        "{}",
        e.message()
    );
    let e = p.set_config(&json!({"drivr": "mock"})).await.unwrap_err();
    assert!(e.message().contains("drivr"), "{}", e.message());
    // A config with the driver alone is whole.
    p.set_config(&json!({"driver": "mock", "data_dir": data.path()}))
        .await
        .unwrap();
    let status = p.shutdown(Duration::from_secs(2)).await;
    assert!(status.success(), "{status:?}");
}

fn mock_config(data: &std::path::Path) -> serde_json::Value {
    json!({"driver": "mock", "data_dir": data, "grant": {"events": true}})
}

/// A mock task's life as Nomad's task runner sees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mock_tasks_life_over_grpc() {
    let data = tempfile::tempdir().unwrap();
    let allocs = tempfile::tempdir().unwrap();
    let p = launch().await;
    p.set_config(&mock_config(data.path())).await.unwrap();
    let mut driver = p.driver();

    // The fingerprint's first message comes at once, healthy, and the stream stays open.
    let mut fp = driver
        .fingerprint(pb::FingerprintRequest {})
        .await
        .unwrap()
        .into_inner();
    let first = tokio::time::timeout(Duration::from_secs(10), fp.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        first.health,
        pb::fingerprint_response::HealthState::Healthy as i32,
        "{first:?}"
    );
    assert!(
        first.attributes.contains_key("driver.paddock"),
        "{:?}",
        first.attributes.keys()
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(300), fp.message())
            .await
            .is_err(),
        "the fingerprint stream ended or sent again at once"
    );
    let caps = driver
        .capabilities(pb::CapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner()
        .capabilities
        .unwrap();
    // The mock answers exec (its echo shell), and the plugin says so.
    assert!(caps.send_signals && caps.exec);
    let schema = driver
        .task_config_schema(pb::TaskConfigSchemaRequest {})
        .await
        .unwrap()
        .into_inner()
        .spec
        .unwrap();
    let Some(spec::Block::Object(o)) = schema.block else {
        panic!("{schema:?}")
    };
    assert!(o.attributes.contains_key("run_for") && o.attributes.contains_key("exit_code"));

    let mut events = driver
        .task_events(pb::TaskEventsRequest {})
        .await
        .unwrap()
        .into_inner();
    let t = task(
        "a1",
        "web",
        &json!({"run_for": "60s", "driver_event": "warming up"}),
        allocs.path(),
    );
    let id = t.id.clone();
    let handle = start(&p, t).await.unwrap();
    assert_eq!(handle.config.as_ref().unwrap().id, id);
    assert!(handle.version >= 1 && !handle.driver_state.is_empty());
    let ev = tokio::time::timeout(Duration::from_secs(10), events.message())
        .await
        .expect("the driver's event")
        .unwrap()
        .unwrap();
    assert_eq!((ev.alloc_id.as_str(), ev.task_name.as_str()), ("a1", "web"));
    assert_eq!(ev.message, "warming up");

    // WaitTask blocks while the task runs; several may wait at once.
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let mut d = p.driver();
            let id = id.clone();
            tokio::spawn(async move { d.wait_task(pb::WaitTaskRequest { task_id: id }).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        waiters.iter().all(|w| !w.is_finished()),
        "WaitTask returned while the task ran"
    );
    let mut stats = driver
        .task_stats(pb::TaskStatsRequest {
            task_id: id.clone(),
            collection_interval: Some(prost_types::Duration {
                seconds: 0,
                nanos: 100_000_000,
            }),
        })
        .await
        .unwrap()
        .into_inner();
    let s = stats.message().await.unwrap().unwrap().stats.unwrap();
    assert_eq!(s.id, id);
    assert!(s.timestamp.is_some() && s.agg_resource_usage.is_some());
    let status = inspect(&p, &id).await;
    assert_eq!(status.state, pb::TaskState::Running as i32);
    assert!(
        status.started_at.is_some() && status.completed_at.is_some() && status.result.is_some()
    );
    // A running task is not destroyed unless forced.
    let e = driver
        .destroy_task(pb::DestroyTaskRequest {
            task_id: id.clone(),
            force: false,
        })
        .await
        .unwrap_err();
    assert!(e.message().contains("running"), "{}", e.message());

    driver
        .stop_task(pb::StopTaskRequest {
            task_id: id.clone(),
            timeout: Some(prost_types::Duration {
                seconds: 2,
                nanos: 0,
            }),
            signal: String::new(),
        })
        .await
        .unwrap();
    for w in waiters {
        let r = tokio::time::timeout(Duration::from_secs(10), w)
            .await
            .unwrap()
            .unwrap()
            .unwrap()
            .into_inner();
        assert!(r.result.is_some(), "{r:?}");
    }
    let again = wait(&p, &id, Duration::from_secs(5)).await;
    assert!(
        again.result.is_some(),
        "WaitTask after the exit answers at once"
    );
    let status = inspect(&p, &id).await;
    assert_eq!(status.state, pb::TaskState::Exited as i32);
    driver
        .destroy_task(pb::DestroyTaskRequest {
            task_id: id.clone(),
            force: true,
        })
        .await
        .unwrap();
    let e = driver
        .inspect_task(pb::InspectTaskRequest {
            task_id: id.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);
    // Stopping a task that is gone is not an error (Nomad cannot tell "not found" apart).
    driver
        .stop_task(pb::StopTaskRequest {
            task_id: id,
            timeout: None,
            signal: String::new(),
        })
        .await
        .unwrap();

    // A task that exits 3 reports it.
    let t = task(
        "a2",
        "batch",
        &json!({"run_for": "100ms", "exit_code": 3}),
        allocs.path(),
    );
    let id = t.id.clone();
    start(&p, t).await.unwrap();
    let r = wait(&p, &id, Duration::from_secs(20)).await;
    assert_eq!(r.result.unwrap().exit_code, 3);
    let _ = p.shutdown(Duration::from_secs(2)).await;
}

/// Start errors as Nomad's restart logic reads them, and a trapping component contained.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_errors_carry_recoverability_and_a_trap_is_contained() {
    let data = tempfile::tempdir().unwrap();
    let allocs = tempfile::tempdir().unwrap();
    let p = launch().await;
    p.set_config(&mock_config(data.path())).await.unwrap();
    let t = task(
        "a1",
        "t",
        &json!({"start_error": "the disk is busy", "start_error_recoverable": true}),
        allocs.path(),
    );
    let e = start(&p, t).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition);
    assert!(e.message().contains("the disk is busy"), "{}", e.message());
    assert_eq!(paddock_nomad_driver::status::recoverable_of(&e), Some(true));
    let t = task(
        "a1",
        "t",
        &json!({"start_error": "no such image"}),
        allocs.path(),
    );
    let e = start(&p, t).await.unwrap_err();
    assert_eq!(
        paddock_nomad_driver::status::recoverable_of(&e),
        Some(false)
    );
    // A bad field is named.
    let t = task(
        "a1",
        "t",
        &json!({"run_for": "soon", "colour": "red"}),
        allocs.path(),
    );
    let e = start(&p, t).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(
        e.message().contains("run_for") && e.message().contains("colour"),
        "{}",
        e.message()
    );
    // A trap in start: a clean error naming the component, and the plugin serves on.
    let t = task(
        "a1",
        "t",
        &json!({"misbehave": {"op": "start", "kind": "trap"}}),
        allocs.path(),
    );
    let e = start(&p, t).await.unwrap_err();
    assert!(e.message().contains("mock"), "{}", e.message());
    assert_eq!(
        paddock_nomad_driver::status::recoverable_of(&e),
        Some(false)
    );
    let t = task("a1", "ok", &json!({"run_for": "10ms"}), allocs.path());
    let id = t.id.clone();
    start(&p, t).await.unwrap();
    assert_eq!(
        wait(&p, &id, Duration::from_secs(20))
            .await
            .result
            .unwrap()
            .exit_code,
        0
    );
    let _ = p.shutdown(Duration::from_secs(2)).await;
}

fn mkfifo(path: &std::path::Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
}

/// raw_exec's output goes into the FIFOs Nomad's logmon reads; the task outlives the plugin
/// (kill -9) and a new plugin process recovers it from the handle Nomad kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_exec_writes_into_nomads_fifos_and_outlives_the_plugin() {
    let data = tempfile::tempdir().unwrap();
    let allocs = tempfile::tempdir().unwrap();
    let logs = allocs.path().join("alloc").join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let (out_fifo, err_fifo) = (logs.join(".sh.stdout.fifo"), logs.join(".sh.stderr.fifo"));
    mkfifo(&out_fifo);
    mkfifo(&err_fifo);
    // logmon's end: opened for reading before the task starts.
    let open_read = |p: &std::path::Path| {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(p)
            .unwrap()
    };
    let out_reader = open_read(&out_fifo);
    let _err_reader = open_read(&err_fifo);

    let config = json!({
        "driver": "raw_exec",
        "data_dir": data.path(),
        "grant": {"process": ["/bin/*", "/usr/bin/*"], "events": true},
    });
    let p = launch().await;
    p.set_config(&config).await.unwrap();
    let mut t = task(
        "a9",
        "sh",
        &json!({"command": "/bin/sh", "args": ["-c", "echo hello from paddock; echo $$ > pid; exec sleep 120"]}),
        allocs.path(),
    );
    t.stdout_path = out_fifo.display().to_string();
    t.stderr_path = err_fifo.display().to_string();
    let task_dir = allocs.path().join("sh");
    std::fs::create_dir_all(&task_dir).unwrap();
    let id = t.id.clone();
    let handle = start(&p, t).await.unwrap();

    // The line arrives through the FIFO.
    let mut got = String::new();
    let reader = tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let mut f = out_reader;
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut buf = [0u8; 256];
        let mut text = String::new();
        while std::time::Instant::now() < deadline && !text.contains('\n') {
            match f.read(&mut buf) {
                Ok(n) if n > 0 => text.push_str(&String::from_utf8_lossy(&buf[..n])),
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        text
    });
    got.push_str(&reader.await.unwrap());
    assert!(
        got.contains("hello from paddock"),
        "stdout FIFO gave {got:?}"
    );
    let pid: i32 = loop {
        if let Ok(s) = std::fs::read_to_string(task_dir.join("pid"))
            && let Ok(n) = s.trim().parse()
        {
            break n;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let alive = |pid: i32| std::path::Path::new(&format!("/proc/{pid}")).exists();

    // The plugin dies; the task does not.
    let log = p.kill().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        alive(pid),
        "the task died with the plugin; plugin log:\n{log}"
    );

    // Nomad starts the plugin again and recovers the task from the handle it stored.
    let p = launch().await;
    p.set_config(&config).await.unwrap();
    p.driver()
        .recover_task(pb::RecoverTaskRequest {
            task_id: id.clone(),
            handle: Some(handle.clone()),
        })
        .await
        .unwrap();
    let mut d = p.driver();
    let waiting = {
        let mut d = p.driver();
        let id = id.clone();
        tokio::spawn(async move { d.wait_task(pb::WaitTaskRequest { task_id: id }).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "WaitTask returned for a recovered running task"
    );
    d.stop_task(pb::StopTaskRequest {
        task_id: id.clone(),
        timeout: Some(prost_types::Duration {
            seconds: 3,
            nanos: 0,
        }),
        signal: "SIGTERM".into(),
    })
    .await
    .unwrap();
    let r = tokio::time::timeout(Duration::from_secs(15), waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap()
        .into_inner();
    let exit = r.result.unwrap();
    assert!(exit.signal == 15 || exit.exit_code != 0, "{exit:?}");
    assert!(
        !alive(pid)
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(" Z ")
    );
    d.destroy_task(pb::DestroyTaskRequest {
        task_id: id.clone(),
        force: true,
    })
    .await
    .unwrap();
    // A handle that is not Paddock's is refused with a message.
    let e = d
        .recover_task(pb::RecoverTaskRequest {
            task_id: "x/y/z".into(),
            handle: Some(pb::TaskHandle {
                driver_state: b"garbage".to_vec(),
                ..Default::default()
            }),
        })
        .await
        .unwrap_err();
    assert!(e.message().contains("driver_state"), "{}", e.message());
    let _ = p.shutdown(Duration::from_secs(2)).await;
}

/// The plugin pulls its driver from a registry named in `components`, verified under
/// `verify_key`: a driver it has never seen on disk fingerprints healthy; signed by another
/// key, or reporting another name, it is refused naming the source; with the registry
/// gone, the cache in the data dir serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_pulled_from_a_registry_is_verified_before_it_runs() {
    use crate::oci::{Publisher, Registry, openssl_key};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut registry = Registry::start(d);
    let publisher = Publisher::new(registry.host()).await;
    let (key, public) = openssl_key(d, "publisher");
    let (_, stranger) = openssl_key(d, "stranger");
    let digest = publisher.push(d, "acme/sleeper:1", guest_artifacts::SLEEPER_DRIVER.bytes);
    publisher.sign("acme/sleeper", &digest, &key);
    let source = format!("oci://{}/acme/sleeper:1", registry.host());
    let config = |key: &std::path::Path, driver: &str| {
        json!({"driver": driver, "components": [source], "verify_key": key,
               "data_dir": d.join("data"), "task_config_fields": ["seconds"]})
    };

    let p = launch().await;
    let e = p
        .set_config(&config(&stranger, "sleeper"))
        .await
        .unwrap_err();
    assert!(
        e.message().contains(&source) && e.message().contains("does not verify"),
        "{}",
        e.message()
    );
    let e = p.set_config(&config(&public, "mock")).await.unwrap_err();
    assert!(
        e.message().contains("reports the name \"sleeper\""),
        "{}",
        e.message()
    );
    p.set_config(&config(&public, "sleeper")).await.unwrap();
    let mut fp = p
        .driver()
        .fingerprint(pb::FingerprintRequest {})
        .await
        .unwrap()
        .into_inner();
    let first = tokio::time::timeout(Duration::from_secs(10), fp.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        first.health,
        pb::fingerprint_response::HealthState::Healthy as i32,
        "{first:?}"
    );
    assert!(p.shutdown(Duration::from_secs(2)).await.success());

    // Nomad starts the plugin again with the registry down: the cache serves.
    registry.stop();
    let p = launch().await;
    p.set_config(&config(&public, "sleeper")).await.unwrap();
    assert!(p.shutdown(Duration::from_secs(2)).await.success());
}
