//! A driver that misbehaves within the contract is capped: a handle past the limit fails
//! its task with a message naming the driver and the limit, and nothing else is touched.

use std::time::Duration;

use serde_json::json;

use crate::harness::{TestAgent, all_terminal, event_types, mock_job};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_over_the_limit_fails_its_task_naming_the_driver_and_others_run_on() {
    let t = TestAgent::start("", vec![]).await;
    // 2 MiB of handle, over the 1 MiB limit; half a MiB, under it; and a plain task.
    let big = mock_job("big", json!({ "run_for": "1s", "handle_padding": 2 << 20 }));
    let fits = mock_job(
        "fits",
        json!({ "run_for": "1s", "handle_padding": 512 << 10 }),
    );
    let plain = mock_job("plain", json!({ "run_for": "1s" }));
    for job in [big, fits, plain] {
        assert!(t.post_job(job).await.status().is_success());
    }
    let wait = |job: &'static str| t.wait_allocs(job, Duration::from_secs(30), all_terminal);
    let big = wait("big").await;
    assert_eq!(big[0]["ClientStatus"], "failed", "{:#}", big[0]);
    let failure = big[0]["TaskStates"]["t"]["Events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["Type"] == "Driver Failure")
        .unwrap_or_else(|| panic!("no Driver Failure: {:#}", big[0]))
        .clone();
    let said = failure["DisplayMessage"]
        .as_str()
        .unwrap_or_default()
        .to_string()
        + failure["DriverError"].as_str().unwrap_or_default();
    assert!(
        said.contains("driver \"mock\" returned a task handle of")
            && said.contains("over the limit of 1048576 bytes"),
        "{failure:#}"
    );
    for job in ["fits", "plain"] {
        let a = wait(job).await;
        assert_eq!(a[0]["ClientStatus"], "complete", "{:#}", a[0]);
        assert!(event_types(&a[0], "t").contains(&"Terminated".to_string()));
    }
    // The agent goes on taking work.
    assert!(
        t.post_job(mock_job("after", json!({})))
            .await
            .status()
            .is_success()
    );
    assert_eq!(wait("after").await[0]["ClientStatus"], "complete");
}

/// A driver that emits 100,000 events in one call: the task's handler gets the first 100
/// of each call, the rest are dropped, and the call answers well inside its deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_events_is_cut_at_the_per_call_limit() {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use crate::harness::{load, runtime, settings};
    use paddock::runtime::Grants;

    let mut s = BTreeMap::new();
    let grants = Grants {
        events: true,
        ..Grants::default()
    };
    s.insert(
        "mock".to_string(),
        settings(grants, Duration::from_secs(10), json!({})),
    );
    let rt = runtime(s);
    load(&rt, guest_artifacts::MOCK_DRIVER).await;
    let got = Arc::new(AtomicUsize::new(0));
    let counter = got.clone();
    rt.services.events.register(
        "flood",
        "t",
        "mock",
        Arc::new(move |_| {
            counter.fetch_add(1, Ordering::Relaxed);
        }),
    );
    let d = rt.driver_manager().dispense("mock").unwrap();
    let config =
        json!({ "run_for": "1h", "driver_event": "flood", "driver_event_repeat": 100_000 });
    for round in 1..=2 {
        let asked = std::time::Instant::now();
        d.start(crate::runtime::task_config("flood", config.clone()), None)
            .await
            .unwrap();
        assert!(
            asked.elapsed() < Duration::from_secs(8),
            "{:?}",
            asked.elapsed()
        );
        // The count starts again with each call (a warm store serves the second).
        assert_eq!(got.load(Ordering::Relaxed), 100 * round);
    }
}
