//! The mock driver's options and misbehaviours, through the real component.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use guest_artifacts as ga;
use paddock::drivermanager::types::{DriverError, TaskState, WaitStatus};
use paddock::drivermanager::types::{ExitResult, TaskHandle};
use paddock::drivermanager::{Driver, DriverCallError, DriverManager};
use paddock::runtime::{CallFailure, Grants};
use serde_json::json;

use crate::harness::{TestAgent, load, runtime, settings};
use crate::runtime::task_config;

async fn mock(
    timeout: Duration,
    plugin_config: serde_json::Value,
) -> (std::sync::Arc<DriverManager>, Driver) {
    let mut s = BTreeMap::new();
    s.insert(
        "mock".to_string(),
        settings(Grants::all(), timeout, plugin_config),
    );
    let rt = runtime(s);
    load(&rt, ga::MOCK_DRIVER).await;
    let dm = rt.driver_manager();
    let d = dm.dispense("mock").unwrap();
    (dm, d)
}

/// Poll `wait` as the task runner does (sleeping for the wake time) until the task exits.
async fn run_to_exit(d: &Driver, h: &TaskHandle, limit: Duration) -> ExitResult {
    let deadline = Instant::now() + limit;
    loop {
        match d.wait(h.clone()).await.unwrap() {
            WaitStatus::Exited(r) => return r,
            WaitStatus::Pending(w) => {
                assert!(
                    Instant::now() < deadline,
                    "task did not exit within {limit:?}"
                );
                let nap = w
                    .after_ns
                    .map(Duration::from_nanos)
                    .unwrap_or(Duration::from_millis(20));
                tokio::time::sleep(nap.min(Duration::from_millis(50))).await;
            }
        }
    }
}

#[tokio::test]
async fn run_for_and_the_exit_options_shape_the_exit() {
    let (_dm, d) = mock(Duration::from_secs(5), json!({})).await;
    let started = Instant::now();
    let h = d
        .start(task_config("x", json!({"run_for": "150ms", "exit_code": 4, "exit_signal": 6, "exit_err_msg": "boom"})), None)
        .await
        .unwrap();
    match d.wait(h.clone()).await.unwrap() {
        WaitStatus::Pending(w) => assert!(w.after_ns.unwrap() <= 150_000_000, "{w:?}"),
        other => panic!("exited too early: {other:?}"),
    }
    assert_eq!(
        d.inspect(h.clone()).await.unwrap().state,
        TaskState::Running
    );
    let exit = run_to_exit(&d, &h, Duration::from_secs(5)).await;
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert_eq!(
        (exit.exit_code, exit.signal, exit.err.as_deref()),
        (4, 6, Some("boom"))
    );
    let st = d.inspect(h.clone()).await.unwrap();
    assert_eq!(st.state, TaskState::Exited);
    assert!(st.completed_at >= st.started_at);
    let usage = d.stats(h.clone()).await.unwrap();
    assert!(usage.timestamp > 0);
    d.destroy(h, false).await.unwrap();
}

#[tokio::test]
async fn start_errors_carry_their_recoverability() {
    let (_dm, d) = mock(Duration::from_secs(5), json!({})).await;
    for recoverable in [false, true] {
        let e = d
            .start(
                task_config(
                    "x",
                    json!({"start_error": "no capacity", "start_error_recoverable": recoverable}),
                ),
                None,
            )
            .await
            .unwrap_err();
        assert_eq!(e.recoverable(), recoverable, "{e}");
        assert!(e.to_string().contains("no capacity"), "{e}");
    }
}

#[tokio::test]
async fn start_block_for_blocks_start_and_its_deadline_still_applies() {
    let (_dm, d) = mock(Duration::from_secs(5), json!({})).await;
    let t = Instant::now();
    d.start(task_config("x", json!({"start_block_for": "300ms"})), None)
        .await
        .unwrap();
    assert!(t.elapsed() >= Duration::from_millis(300));
    let (_dm, d) = mock(Duration::from_millis(200), json!({})).await;
    match d
        .start(task_config("x", json!({"start_block_for": "10s"})), None)
        .await
    {
        Err(DriverCallError::Component(e)) => assert_eq!(e.kind, CallFailure::Deadline),
        other => panic!("expected a deadline, got {other:?}"),
    }
}

#[tokio::test]
async fn stop_honours_kill_after_and_escalates_at_the_timeout() {
    let (_dm, d) = mock(Duration::from_secs(5), json!({})).await;
    // The task dies 100 ms after the stop, by the stop signal.
    let h = d
        .start(
            task_config("a", json!({"run_for": "1h", "kill_after": "100ms"})),
            None,
        )
        .await
        .unwrap();
    let t = Instant::now();
    let h = d.stop(h, 5_000_000_000, "SIGTERM".into()).await.unwrap();
    let exit = run_to_exit(&d, &h, Duration::from_secs(5)).await;
    assert!(t.elapsed() >= Duration::from_millis(100));
    assert_eq!(exit.signal, 15);
    // A task that would outlive the stop timeout is killed at the timeout.
    let h = d
        .start(
            task_config("b", json!({"run_for": "1h", "kill_after": "10s"})),
            None,
        )
        .await
        .unwrap();
    let t = Instant::now();
    let h = d.stop(h, 100_000_000, "SIGINT".into()).await.unwrap();
    let exit = run_to_exit(&d, &h, Duration::from_secs(5)).await;
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(exit.signal, 9);
}

#[tokio::test]
async fn signal_error_fails_the_signal_call() {
    let (_dm, d) = mock(Duration::from_secs(5), json!({})).await;
    let h = d
        .start(task_config("x", json!({"run_for": "1h"})), None)
        .await
        .unwrap();
    d.signal(h.clone(), "SIGHUP".into()).await.unwrap();
    let h = d
        .start(
            task_config("y", json!({"run_for": "1h", "signal_error": "nope"})),
            None,
        )
        .await
        .unwrap();
    match d.signal(h, "SIGHUP".into()).await {
        Err(DriverCallError::Driver(DriverError::Failed(f))) => assert_eq!(f.message, "nope"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn misbehaviour_in_stop_and_wait_is_contained() {
    let (_dm, d) = mock(Duration::from_millis(500), json!({})).await;
    for (op, kind, want) in [
        ("stop", "trap", CallFailure::Trap),
        ("stop", "hang", CallFailure::Deadline),
        ("wait", "oom", CallFailure::OutOfMemory),
        ("wait", "loop", CallFailure::Deadline),
    ] {
        let h = d
            .start(
                task_config(
                    "x",
                    json!({"run_for": "1h", "misbehave": {"op": op, "kind": kind}}),
                ),
                None,
            )
            .await
            .unwrap();
        let r = match op {
            "stop" => d.stop(h, 1_000_000_000, "SIGTERM".into()).await.map(|_| ()),
            _ => d.wait(h).await.map(|_| ()),
        };
        match r {
            Err(DriverCallError::Component(e)) => {
                assert_eq!(
                    (e.op, e.kind),
                    (if op == "stop" { "stop" } else { "wait" }, want),
                    "{e}"
                );
            }
            other => panic!("{op}/{kind}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_driver_whose_fingerprint_loops_is_unhealthy_and_the_agent_runs_on() {
    let t = TestAgent::start(
        "plugin \"mock\" {\n grant {\n events = true\n }\n limits {\n call_timeout = \"300ms\"\n }\n config {\n misbehave = { op = \"fingerprint\", kind = \"loop\" }\n }\n}",
        vec![],
    )
    .await;
    let node = t.get("/v1/node/self").await;
    let d = &node["Drivers"]["mock"];
    assert_eq!(d["Healthy"], false, "{d:#}");
    assert!(
        d["HealthDescription"]
            .as_str()
            .unwrap()
            .contains("fingerprint"),
        "{d:#}"
    );
    // As in Nomad's scheduler, an unhealthy driver is filtered out: the job is accepted,
    // not placed ("missing drivers"), and the agent runs on.
    let eval = t
        .register(crate::harness::mock_job(
            "still",
            json!({"run_for": "10ms"}),
        ))
        .await;
    assert_eq!(
        eval["FailedTGAllocs"]["g"]["ConstraintFiltered"]["missing drivers"], 1,
        "{eval:#}"
    );
    assert_eq!(t.get("/v1/job/still/allocations").await, json!([]));
    assert_eq!(t.get("/v1/agent/health").await["client"]["ok"], true);
}

#[tokio::test]
async fn recover_reattaches_to_a_known_task_and_its_misbehaviour_is_contained() {
    let (_dm, d) = mock(Duration::from_millis(500), json!({})).await;
    let h = d
        .start(task_config("r", json!({"run_for": "1h"})), None)
        .await
        .unwrap();
    let recovered = d.recover(h.clone()).await.unwrap();
    assert_eq!(recovered, h);
    assert_eq!(
        d.inspect(recovered).await.unwrap().state,
        TaskState::Running
    );
    let bad = d
        .start(
            task_config(
                "s",
                json!({"run_for": "1h", "misbehave": {"op": "recover", "kind": "trap"}}),
            ),
            None,
        )
        .await
        .unwrap();
    match d.recover(bad).await {
        Err(DriverCallError::Component(e)) => {
            assert_eq!((e.op, e.kind), ("recover", CallFailure::Trap))
        }
        other => panic!("{other:?}"),
    }
    let caps = d.capabilities().await.unwrap();
    assert!(caps.send_signals);
}

/// Under load a driver's `validate-config` can miss its deadline: that is the agent being
/// busy, so the restart policy applies instead of failing the task for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_validate_config_that_misses_its_deadline_at_start_is_recoverable() {
    let t = TestAgent::start(
        "plugin \"mock\" {\n limits {\n call_timeout = \"300ms\"\n }\n config {\n misbehave = { op = \"validate_config\", kind = \"hang\" }\n }\n}",
        vec![],
    )
    .await;
    // A config holding `${...}` is validated by the driver at start, not at registration.
    let mut job = crate::harness::mock_job("busy", json!({"run_for": "${NOMAD_META_d}"}));
    job["Meta"] = json!({"d": "1h"});
    job["TaskGroups"][0]["RestartPolicy"] = json!({ "Attempts": 1, "Delay": 10_000_000u64,
        "Interval": 3_600_000_000_000u64, "Mode": "fail" });
    t.register(job).await;
    let allocs = t
        .wait_allocs(
            "busy",
            Duration::from_secs(30),
            crate::harness::all_terminal,
        )
        .await;
    let id = allocs[0]["ID"].as_str().unwrap();
    let a = t.get(&format!("/v1/allocation/{id}")).await;
    let events: Vec<(String, String)> = a["TaskStates"]["t"]["Events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["Type"].as_str().unwrap().to_string(),
                e["DisplayMessage"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let failures: Vec<_> = events
        .iter()
        .filter(|(ty, _)| ty == "Driver Failure")
        .collect();
    assert_eq!(failures.len(), 2, "tried again once: {events:#?}");
    assert!(
        failures[0]
            .1
            .contains("missed its deadline in validate-config"),
        "{events:#?}"
    );
    assert!(
        events.iter().any(|(ty, _)| ty == "Restarting"),
        "{events:#?}"
    );
    let last = events.last().unwrap();
    assert_eq!(last.0, "Not Restarting", "{events:#?}");
    assert!(last.1.contains("Exceeded allowed attempts"), "{events:#?}");
}
