//! The component runtime through real components: each world loads and answers; bad files
//! are refused with a reason; loops, traps, memory bombs and hangs are contained; grants
//! are enforced; compilations are cached.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use guest_artifacts as ga;
use paddock::devicemanager::DevicePlugin;
use paddock::drivermanager::DriverCallError;
use paddock::drivermanager::types::{LogConfig, TaskConfig, TaskResources, TaskState};
use paddock::hookmanager::{HookError, HookManager, HookTask};
use paddock::runtime::inspect::InspectError;
use paddock::runtime::{
    CacheOutcome, CallFailure, ComponentSource, Grants, LoadError, TaskContext, World,
};

use crate::harness::{load, runtime, settings};

pub fn task_config(id: &str, driver_config: serde_json::Value) -> TaskConfig {
    TaskConfig {
        id: format!("{id}/t/abcdef12"),
        name: "t".into(),
        alloc_id: id.into(),
        job_id: "j".into(),
        job_name: "j".into(),
        group_name: "g".into(),
        namespace: "default".into(),
        node_id: "n".into(),
        node_name: "n".into(),
        env: vec![],
        device_env: vec![],
        user: String::new(),
        resources: TaskResources {
            cpu_mhz: 100,
            memory_mb: 64,
            memory_max_mb: 0,
        },
        driver_config: driver_config.to_string(),
        alloc_dir: "/tmp".into(),
        task_dir: "/tmp".into(),
        stdout_path: String::new(),
        stderr_path: String::new(),
        logs: LogConfig {
            max_files: 2,
            max_file_size_mb: 1,
        },
        kill_signal: "SIGINT".into(),
        kill_timeout_ns: 1_000_000_000,
        mounts: vec![],
        devices: vec![],
    }
}

fn task_info() -> HookTask {
    HookTask {
        alloc_id: "a1".into(),
        job_id: "j".into(),
        group_name: "g".into(),
        task_name: "web".into(),
        driver: "mock".into(),
        driver_config: "{}".into(),
        meta: BTreeMap::new(),
        task_dir: "/tmp".into(),
        resources: TaskResources {
            cpu_mhz: 100,
            memory_mb: 64,
            memory_max_mb: 0,
        },
        templates: vec![],
    }
}

/// The hooks of a runtime, none attached by config.
fn hooks(rt: &crate::harness::TestRuntime) -> Arc<HookManager> {
    HookManager::new(Arc::clone(rt), &BTreeMap::new())
}

#[tokio::test]
async fn each_world_loads_and_answers() {
    let mut s = BTreeMap::new();
    s.insert(
        "env-inject".to_string(),
        settings(
            Grants {
                env: true,
                ..Default::default()
            },
            Duration::from_secs(5),
            serde_json::json!({"env": {"WHO": "task ${NOMAD_TASK_NAME} on ${attr.kernel.name}"}}),
        ),
    );
    let rt = runtime(s);

    let driver = load(&rt, ga::MOCK_DRIVER).await;
    assert_eq!(
        (
            driver.name.as_str(),
            driver.world,
            driver.contract_version.as_str()
        ),
        ("mock", World::Driver, paddock::runtime::contract::SERVED[0])
    );
    let dm = rt.driver_manager();
    let d = dm.dispense("mock").expect("mock driver registered");
    let fp = d.fingerprint().await.unwrap();
    assert_eq!(fp.health_description, "Healthy");
    let h = d
        .start(
            task_config("a1", serde_json::json!({"run_for": "1h"})),
            None,
        )
        .await
        .unwrap();
    assert_eq!(h.task_id, "a1/t/abcdef12");
    let st = d.inspect(h.clone()).await.unwrap();
    assert_eq!(st.state, TaskState::Running);

    let device = load(&rt, ga::MOCK_DEVICE).await;
    assert_eq!(
        (device.name.as_str(), device.world),
        ("mock-device", World::DevicePlugin)
    );
    let plugin = DevicePlugin::get(&rt, &device.name).unwrap();
    let groups = plugin.fingerprint().await.unwrap();
    assert_eq!(groups[0].instances.len(), 2);
    let res = plugin.reserve(vec!["mock-1".to_string()]).await.unwrap();
    assert!(
        res.env
            .contains(&("MOCK_DEVICE_IDS".to_string(), "mock-1".to_string())),
        "{res:?}"
    );

    let hook = load(&rt, ga::ENV_INJECT_HOOK).await;
    assert_eq!(
        (hook.name.as_str(), hook.world),
        ("env-inject", World::Hook)
    );
    let mut env = paddock::taskenv::TaskEnv::default();
    env.env.insert("NOMAD_TASK_NAME".into(), "web".into());
    std::sync::Arc::make_mut(&mut env.node).insert("attr.kernel.name".into(), "linux".into());
    let ctx = Arc::new(TaskContext {
        env,
        ..Default::default()
    });
    let resp = hooks(&rt)
        .prestart(&hook.name, &task_info(), Some(ctx), &BTreeMap::new())
        .await
        .unwrap();
    assert_eq!(
        resp.env.into_iter().collect::<Vec<_>>(),
        vec![("WHO".to_string(), "task web on linux".to_string())]
    );
}

#[tokio::test]
async fn ungranted_import_is_a_typed_denial_not_a_trap() {
    // No settings for env-inject: deny by default.
    let mut s = BTreeMap::new();
    s.insert(
        "env-inject".to_string(),
        settings(
            Grants::default(),
            Duration::from_secs(5),
            serde_json::json!({"env": {"A": "${NOMAD_TASK_NAME}"}}),
        ),
    );
    let rt = runtime(s);
    let hook = load(&rt, ga::ENV_INJECT_HOOK).await;
    let r = hooks(&rt)
        .prestart(&hook.name, &task_info(), None, &BTreeMap::new())
        .await;
    match r {
        Err(HookError::Failed { message: m, .. }) => {
            assert!(m.contains("no `env` grant"), "{m}")
        }
        other => panic!("expected the hook to report the denial as a failure, got {other:?}"),
    }
}

#[tokio::test]
async fn bad_files_are_refused_with_reasons_and_the_rest_load() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a-text.wasm"), b"this is not wasm").unwrap();
    std::fs::write(dir.path().join("b-core.wasm"), b"\0asm\x01\0\0\0").unwrap();
    std::fs::write(
        dir.path().join("c-unknown.wasm"),
        ga::FIXTURE_UNKNOWN_WORLD.bytes,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("d-future.wasm"),
        ga::FIXTURE_FUTURE_VERSION.bytes,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("e-truncated.wasm"),
        &ga::MOCK_DRIVER.bytes[..ga::MOCK_DRIVER.bytes.len() / 2],
    )
    .unwrap();
    std::fs::write(
        dir.path().join("f-mismatched.wasm"),
        ga::FIXTURE_MISMATCHED_HOOK.bytes,
    )
    .unwrap();
    std::fs::write(dir.path().join("z-mock.wasm"), ga::MOCK_DRIVER.bytes).unwrap();
    std::fs::write(dir.path().join("readme.txt"), b"ignored: not .wasm").unwrap();

    let rt = runtime(BTreeMap::new());
    let (loaded, refused) = rt.load_dir(dir.path()).await.unwrap();
    assert_eq!(loaded.len(), 1);
    assert_eq!(loaded[0].name, "mock");
    let reasons: BTreeMap<String, String> = refused
        .iter()
        .map(|r| match &r.source {
            ComponentSource::File(p) => (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                r.to_string(),
            ),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(reasons.len(), 6, "{reasons:#?}");
    let m = &reasons["f-mismatched.wasm"];
    assert!(
        m.contains("does not match the hook world of paddock:plugin@0.1.0")
            && m.contains("expected record of 2 fields, found 3"),
        "{m}"
    );
    assert!(matches!(
        refused[0].error,
        LoadError::Inspect(InspectError::NotWasm)
    ));
    assert!(
        reasons["a-text.wasm"].contains("a-text.wasm")
            && reasons["a-text.wasm"].contains("not a WebAssembly file"),
        "{reasons:#?}"
    );
    assert!(
        reasons["b-core.wasm"].contains("core WebAssembly module, not a component"),
        "{reasons:#?}"
    );
    assert!(
        reasons["c-unknown.wasm"].contains("exports no Paddock world")
            && reasons["c-unknown.wasm"].contains("acme:widgets"),
        "{reasons:#?}"
    );
    assert!(
        reasons["d-future.wasm"].contains("paddock:plugin@9.0.0")
            && reasons["d-future.wasm"].contains(&format!(
                "supports {}",
                paddock::runtime::contract::SERVED[0]
            )),
        "{reasons:#?}"
    );
    assert!(
        reasons["e-truncated.wasm"].contains("invalid component"),
        "{reasons:#?}"
    );
}

async fn contained(kind: &str) -> paddock::runtime::CallError {
    let mut s = BTreeMap::new();
    s.insert(
        "mock".to_string(),
        settings(
            Grants::all(),
            Duration::from_millis(800),
            serde_json::json!({}),
        ),
    );
    let rt = runtime(s);
    load(&rt, ga::MOCK_DRIVER).await;
    let d = rt.driver_manager().dispense("mock").unwrap();
    let mock = rt.registry.get(World::Driver, "mock").unwrap();
    // A clean call leaves its store warm, and the misbehaving call below takes it.
    d.start(task_config("warm", serde_json::json!({})), None)
        .await
        .unwrap();
    assert_eq!(mock.warm_idle(), 1);
    let started = Instant::now();
    let err = d
        .start(
            task_config(
                "bad",
                serde_json::json!({"misbehave": {"op": "start", "kind": kind}}),
            ),
            None,
        )
        .await
        .expect_err("a misbehaving start must fail");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "containment took {:?}",
        started.elapsed()
    );
    // The broken store is dropped, never handed to another call, and the driver still
    // works in a fresh one.
    assert_eq!(
        mock.warm_idle(),
        0,
        "a failed call's store must not be reused"
    );
    let h = d
        .start(
            task_config("good", serde_json::json!({"run_for": "1s"})),
            None,
        )
        .await
        .unwrap();
    assert_eq!(h.task_id, "good/t/abcdef12");
    assert_eq!(mock.warm_idle(), 1);
    match err {
        DriverCallError::Component(e) => {
            assert_eq!(e.component, "mock");
            assert_eq!(e.op, "start");
            e
        }
        other => panic!("expected a component failure, got {other}"),
    }
}

#[tokio::test]
async fn a_looping_guest_is_stopped_by_its_deadline() {
    let e = contained("loop").await;
    assert_eq!(e.kind, CallFailure::Deadline, "{e}");
}

#[tokio::test]
async fn a_trapping_guest_is_an_error_naming_the_component() {
    let e = contained("trap").await;
    assert_eq!(e.kind, CallFailure::Trap, "{e}");
    assert!(
        e.to_string().contains("\"mock\"") && e.detail.contains("panicked"),
        "{e}"
    );
}

#[tokio::test]
async fn a_memory_bomb_hits_its_cap() {
    let e = contained("oom").await;
    assert_eq!(e.kind, CallFailure::OutOfMemory, "{e}");
    assert!(e.detail.contains("32 MiB"), "{e}");
}

#[tokio::test]
async fn a_guest_that_never_answers_misses_its_deadline() {
    let e = contained("hang").await;
    assert_eq!(e.kind, CallFailure::Deadline, "{e}");
}

#[tokio::test]
async fn compilations_are_cached_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || paddock::runtime::RuntimeOptions {
        cache_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let rt1 = paddock::runtime::Runtime::new(opts()).unwrap();
    let c1 = load(&rt1, ga::MOCK_DEVICE).await;
    assert_eq!(c1.cache, CacheOutcome::Miss);
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "one cache entry written"
    );
    let rt2 = paddock::runtime::Runtime::new(opts()).unwrap();
    let c2 = load(&rt2, ga::MOCK_DEVICE).await;
    assert_eq!(c2.cache, CacheOutcome::Hit);
    assert_eq!(c1.sha256, c2.sha256);
    assert!(
        c2.load_time < c1.load_time,
        "cached {:?} vs compiled {:?}",
        c2.load_time,
        c1.load_time
    );
    // A cached component works.
    let groups = DevicePlugin::get(&rt2, &c2.name)
        .unwrap()
        .fingerprint()
        .await
        .unwrap();
    assert_eq!(groups.len(), 1);
    // A damaged entry is discarded and recompiled, never trusted. (Entries are mmapped
    // while loaded, so the damage replaces the file instead of rewriting it in place.)
    drop((c1, c2, rt1, rt2));
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let path = e.unwrap().path();
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, b"garbage").unwrap();
    }
    let rt3 = paddock::runtime::Runtime::new(opts()).unwrap();
    let c3 = load(&rt3, ga::MOCK_DEVICE).await;
    assert_eq!(c3.cache, CacheOutcome::Miss);
}

#[tokio::test]
async fn a_hook_with_a_bad_config_says_which_field() {
    let mut s = BTreeMap::new();
    s.insert(
        "env-inject".to_string(),
        settings(
            Grants {
                env: true,
                ..Default::default()
            },
            Duration::from_secs(5),
            serde_json::json!({"env": {"A": 1}}),
        ),
    );
    let rt = runtime(s);
    let hook = load(&rt, ga::ENV_INJECT_HOOK).await;
    let r = hooks(&rt)
        .prestart(&hook.name, &task_info(), None, &BTreeMap::new())
        .await;
    match r {
        Err(HookError::InvalidConfig { fields, .. }) => {
            assert_eq!(fields.len(), 1);
            assert_eq!(fields[0].field, "env.A");
        }
        other => panic!("expected invalid-config, got {other:?}"),
    }
}

#[tokio::test]
async fn raw_exec_signals_and_stats_go_through_the_host() {
    use paddock::drivermanager::types::WaitStatus;
    let mut s = BTreeMap::new();
    s.insert(
        "raw_exec".to_string(),
        settings(
            Grants {
                process: vec!["*".into()],
                ..Default::default()
            },
            Duration::from_secs(5),
            serde_json::json!({}),
        ),
    );
    let rt = runtime(s);
    load(&rt, ga::RAW_EXEC_DRIVER).await;
    let d = rt.driver_manager().dispense("raw_exec").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = task_config(
        "sig",
        serde_json::json!({"command": "/bin/sh", "args": ["-c", "trap 'exit 7' USR1; echo ready; while :; do sleep 0.05; done"]}),
    );
    cfg.task_dir = dir.path().display().to_string();
    cfg.stdout_path = dir.path().join("out").display().to_string();
    cfg.env = vec![("PATH".into(), "/usr/bin:/bin".into())];
    let h = d.start(cfg, None).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(dir.path().join("out.0")).unwrap_or_default() != "ready\n" {
        assert!(Instant::now() < deadline, "never ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let usage = d.stats(h.clone()).await.unwrap();
    assert!(usage.rss_bytes > 0, "{usage:?}");
    assert!(matches!(
        d.wait(h.clone()).await.unwrap(),
        WaitStatus::Pending(_)
    ));
    d.signal(h.clone(), "SIGUSR1".into()).await.unwrap();
    let exit = loop {
        match d.wait(h.clone()).await.unwrap() {
            WaitStatus::Exited(r) => break r,
            WaitStatus::Pending(_) => {
                assert!(Instant::now() < deadline, "never exited");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    assert_eq!((exit.exit_code, exit.signal), (7, 0));
    d.destroy(h.clone(), false).await.unwrap();
    // Destroyed: the task is gone.
    assert!(matches!(d.wait(h).await, Err(DriverCallError::Driver(_))));
}

#[tokio::test]
async fn a_driver_whose_calls_trap_in_a_row_is_unhealthy_until_it_fingerprints_again() {
    let mut s = BTreeMap::new();
    s.insert(
        "mock".to_string(),
        settings(Grants::all(), Duration::from_secs(2), serde_json::json!({})),
    );
    let rt = runtime(s);
    load(&rt, ga::MOCK_DRIVER).await;
    let dm = rt.driver_manager();
    dm.fingerprint_all().await;
    assert!(dm.infos()["mock"].healthy);
    let d = dm.dispense("mock").unwrap();
    let trap = || {
        d.start(
            task_config(
                "t",
                serde_json::json!({"misbehave": {"op": "start", "kind": "trap"}}),
            ),
            None,
        )
    };
    // The circuit breaker: failures short of the limit, or broken by a success, leave the
    // driver healthy.
    let limit = paddock::drivermanager::health::TRIP_AFTER;
    for _ in 1..limit {
        trap().await.unwrap_err();
    }
    assert!(dm.infos()["mock"].healthy, "tripped early");
    d.capabilities().await.unwrap();
    for _ in 1..limit {
        trap().await.unwrap_err();
    }
    assert!(
        dm.infos()["mock"].healthy,
        "a success did not reset the count"
    );
    trap().await.unwrap_err();
    let info = &dm.infos()["mock"];
    assert!(
        !info.healthy && info.health_description.contains("trapped"),
        "{info:?}"
    );
    let events = dm.node_events();
    assert!(
        events
            .last()
            .unwrap()
            .message
            .starts_with("Driver unhealthy"),
        "{events:?}"
    );
    dm.fingerprint_all().await;
    assert!(dm.infos()["mock"].healthy);
    assert_eq!(dm.node_events().last().unwrap().message, "Driver healthy");
}
