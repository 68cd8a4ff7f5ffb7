//! Load must not look like a broken plugin: registration answers before it places, one
//! plan at a time (never two placements on the same free capacity), and starts beyond
//! what the agent runs at once wait their turn in the start queue.

use std::time::Duration;

use serde_json::json;

use crate::harness::TestAgent;

fn job(id: &str, count: u32, memory_mb: u32, config: serde_json::Value) -> serde_json::Value {
    json!({ "ID": id, "Type": "service", "TaskGroups": [{ "Name": "g", "Count": count,
        "Tasks": [{ "Name": "t", "Driver": "mock", "Config": config,
            "Resources": { "CPU": 10, "MemoryMB": memory_mb } }] }] })
}

fn metric(m: &serde_json::Value, kind: &str, name: &str) -> f64 {
    let field = if kind == "Gauges" { "Value" } else { "Count" };
    m[kind]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["Name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {kind}"))[field]
        .as_f64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registrations_at_once_are_placed_one_plan_at_a_time_and_never_overcommit() {
    let t = TestAgent::start("client {\n  memory_total_mb = 1000\n}\n", vec![]).await;
    let total = t.get("/v1/node/self").await["NodeResources"]["Memory"]["MemoryMB"]
        .as_u64()
        .unwrap();
    assert_eq!(total, 1000);
    // Four jobs of 6 x 100 MB asked at the same moment: 2,400 MB on a 1,000 MB node.
    let post = |i: u32| {
        let t = &t;
        async move {
            let r = t
                .post_job(job(&format!("j{i}"), 6, 100, json!({"run_for": "1h"})))
                .await;
            assert_eq!(r.status(), 200);
            let reg: serde_json::Value = r.json().await.unwrap();
            t.eval_done(reg["EvalID"].as_str().unwrap()).await
        }
    };
    let (a, b, c, d) = tokio::join!(post(0), post(1), post(2), post(3));
    let evals = [a, b, c, d];
    let queued: u64 = evals
        .iter()
        .map(|e| e["QueuedAllocations"]["g"].as_u64().unwrap())
        .sum();
    let allocs = t.get("/v1/allocations").await;
    let placed = allocs.as_array().unwrap().len() as u64;
    assert_eq!(placed + queued, 24, "{evals:#?}");
    assert!(
        placed * 100 <= total,
        "{placed} allocations of 100 MB placed on a node of {total} MB: {evals:#?}"
    );
    assert!(placed >= 9, "what fits is placed: {placed}");
    for e in &evals {
        assert_eq!(e["Status"], "complete");
        let q = e["QueuedAllocations"]["g"].as_u64().unwrap();
        assert_eq!(
            q > 0,
            !e["BlockedEval"].as_str().unwrap().is_empty(),
            "{e:#}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_beyond_max_parallel_starts_wait_their_turn_in_the_start_queue() {
    let t = TestAgent::start("client {\n  max_parallel_starts = 1\n}\n", vec![]).await;
    let m = t.get("/v1/metrics").await;
    assert_eq!(
        metric(&m, "Gauges", "paddock.client.start_queue.parallel"),
        1.0
    );
    assert_eq!(
        metric(&m, "Gauges", "paddock.client.start_queue.bound"),
        4096.0
    );
    // Each start holds the driver 300 ms: one at a time, the fourth waits about 0.9 s,
    // and none misses its deadline (it counts from the turn, not from the wait).
    let r = t
        .post_job(job(
            "q",
            4,
            10,
            json!({"run_for": "1h", "start_block_for": "300ms"}),
        ))
        .await;
    assert_eq!(r.status(), 200);
    let mut most_running = 0.0f64;
    let mut most_waiting = 0.0f64;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let m = t.get("/v1/metrics").await;
        most_running = most_running.max(metric(&m, "Gauges", "paddock.client.start_queue.running"));
        most_waiting = most_waiting.max(metric(&m, "Gauges", "paddock.client.start_queue.waiting"));
        let allocs = t.get("/v1/job/q/allocations").await;
        let running = allocs
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["ClientStatus"] == "running")
            .count();
        if running == 4 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{allocs:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(most_running, 1.0, "one start at a time");
    assert!(most_waiting >= 1.0, "starts were seen waiting");
    let m = t.get("/v1/metrics").await;
    assert_eq!(
        metric(&m, "Counters", "paddock.client.start_queue.started"),
        4.0
    );
    assert!(metric(&m, "Counters", "paddock.client.start_queue.queued") >= 2.0);
    // Waits of about 0.3 + 0.6 + 0.9 s, if the three others queued behind the first.
    assert!(metric(&m, "Counters", "paddock.client.start_queue.wait_seconds") >= 0.5);
    assert_eq!(
        metric(&m, "Gauges", "paddock.client.start_queue.waiting"),
        0.0
    );
    // The state DB's write path is counted too.
    assert!(metric(&m, "Counters", "paddock.state.commits") > 0.0);
    assert!(
        metric(&m, "Counters", "paddock.state.writes")
            >= metric(&m, "Counters", "paddock.state.commits")
    );
}
