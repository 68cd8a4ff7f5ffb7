//! Bad input on every kind of endpoint: a clear 4xx naming the problem, and the agent
//! and its running job unaffected.

use std::time::Duration;

use serde_json::json;

use crate::harness::{TestAgent, mock_job};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_on_every_kind_of_endpoint_is_a_clear_4xx_and_the_agent_goes_on() {
    let t = TestAgent::start("", vec![]).await;
    let r = t
        .post_job(mock_job("keep", json!({"run_for": "60s"})))
        .await;
    assert!(r.status().is_success());
    let alloc = t
        .wait_allocs("keep", Duration::from_secs(20), |a| {
            a.len() == 1 && a[0]["ClientStatus"] == "running"
        })
        .await[0]["ID"]
        .as_str()
        .unwrap()
        .to_string();
    use reqwest::Method;
    let cases: Vec<(Method, String, Vec<u8>, u16, &str)> = vec![
        (
            Method::POST,
            "/v1/jobs".into(),
            b"{not json".to_vec(),
            400,
            "invalid JSON",
        ),
        (
            Method::POST,
            "/v1/job/keep".into(),
            b"[1, 2".to_vec(),
            400,
            "invalid JSON",
        ),
        (
            Method::POST,
            "/v1/validate/job".into(),
            b"{".to_vec(),
            400,
            "invalid JSON",
        ),
        (
            Method::POST,
            "/v1/jobs/parse".into(),
            b"nope".to_vec(),
            400,
            "invalid JSON",
        ),
        (
            Method::POST,
            "/v1/jobs/parse".into(),
            br#"{"JobHCL": "job {"}"#.to_vec(),
            400,
            "",
        ),
        (
            Method::GET,
            "/v1/job/nope".into(),
            vec![],
            404,
            "job not found",
        ),
        (
            Method::DELETE,
            "/v1/job/nope?purge=maybe".into(),
            vec![],
            400,
            "purge",
        ),
        (
            Method::GET,
            "/v1/job/nope/allocations".into(),
            vec![],
            404,
            "job not found",
        ),
        (
            Method::GET,
            "/v1/job/nope/evaluations".into(),
            vec![],
            404,
            "job not found",
        ),
        (
            Method::GET,
            "/v1/allocation/nope".into(),
            vec![],
            404,
            "alloc not found",
        ),
        (
            Method::POST,
            "/v1/allocation/nope/stop".into(),
            vec![],
            404,
            "alloc not found",
        ),
        (
            Method::GET,
            "/v1/evaluation/nope".into(),
            vec![],
            404,
            "eval not found",
        ),
        (
            Method::GET,
            "/v1/node/nope".into(),
            vec![],
            404,
            "node not found",
        ),
        (
            Method::GET,
            "/v1/nope".into(),
            vec![],
            404,
            "Invalid URL path",
        ),
        (
            Method::PUT,
            "/v1/allocations".into(),
            vec![],
            405,
            "Invalid method: PUT",
        ),
        (
            Method::DELETE,
            "/v1/jobs".into(),
            vec![],
            405,
            "Invalid method: DELETE",
        ),
        (
            Method::POST,
            "/v1/metrics".into(),
            vec![],
            405,
            "Invalid method",
        ),
        (
            Method::GET,
            "/v1/metrics?format=xml".into(),
            vec![],
            400,
            "not supported",
        ),
        (
            Method::POST,
            format!("/v1/client/allocation/{alloc}/signal"),
            b"{bad".to_vec(),
            400,
            "invalid JSON",
        ),
        (
            Method::POST,
            format!("/v1/client/allocation/{alloc}/signal"),
            br#"{"Signal": "SIGNOPE"}"#.to_vec(),
            400,
            "invalid signal",
        ),
        (
            Method::POST,
            format!("/v1/client/allocation/{alloc}/restart"),
            br#"{"TaskName": "ghost"}"#.to_vec(),
            404,
            "ghost",
        ),
        (
            Method::GET,
            format!("/v1/client/fs/cat/{alloc}?path=../../../etc/passwd"),
            vec![],
            400,
            "",
        ),
        (
            Method::GET,
            format!("/v1/client/fs/logs/{alloc}?task=t&type=stdin"),
            vec![],
            400,
            "type",
        ),
        (
            Method::GET,
            "/v1/jobs?index=notanumber".into(),
            vec![],
            400,
            "",
        ),
    ];
    for (method, path, body, want, says) in cases {
        let r = t
            .http
            .request(method.clone(), t.url(&path))
            .body(body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        assert_eq!(status, want, "{method} {path}: {text}");
        assert!(
            !text.trim().is_empty(),
            "{method} {path}: an empty {status}"
        );
        assert!(
            text.contains(says),
            "{method} {path}: {text:?} should say {says:?}"
        );
    }
    // An oversized body is refused from its Content-Length, before it is sent: a client
    // that announces 5 MiB gets its 413 without writing a byte of it.
    for path in ["/v1/jobs", "/v1/validate/job", "/v1/job/keep"] {
        let (status, text) = announce_big_body(&t, path).await;
        assert_eq!(status, 413, "{path}: {text}");
        assert!(text.contains("length limit"), "{path}: {text}");
    }
    // Nothing was lost or stopped: the job still runs, the agent still answers.
    let a = t.get(&format!("/v1/allocation/{alloc}")).await;
    assert_eq!(a["ClientStatus"], "running", "{a:#}");
    assert_eq!(t.get("/v1/jobs").await.as_array().unwrap().len(), 1);
    assert_eq!(t.get("/v1/agent/health").await["client"]["ok"], true);
}

/// POST to `path` announcing a 5 MiB body and sending none of it; the status and body of
/// the answer.
async fn announce_big_body(t: &TestAgent, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = t.base.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        5 << 20
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    // Read the head and the (short) body; the server may keep the connection open.
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let n = s.read(&mut chunk).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buf);
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let len = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                    })
                    .unwrap_or(0);
                if body.len() >= len {
                    break;
                }
            }
        }
    })
    .await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// A job past one of the registration bounds is a 400 naming the field and the bound, at
/// once: `Count` 2^31-1 used to be taken and never answered while memory grew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_past_a_bound_is_a_400_naming_the_field_and_the_bound_at_once() {
    let t = TestAgent::start("", vec![]).await;
    let task = json!({ "Name": "t", "Driver": "mock", "Config": { "run_for": "1s" } });
    let group = |name: String, count: u64, tasks: usize| {
        let tasks: Vec<_> = (0..tasks)
            .map(|i| json!({ "Name": format!("t{i}"), "Driver": "mock" }))
            .collect();
        json!({ "Name": name, "Count": count, "Tasks": tasks })
    };
    let job = |groups: Vec<serde_json::Value>| json!({ "ID": "big", "Type": "batch", "TaskGroups": groups });
    let cases = [
        (
            job(vec![group("g".into(), 2_147_483_647, 1)]),
            "Job.TaskGroups[0].Count: 2147483647 is over the limit of 10000 allocations per group",
        ),
        (
            job((0..1001).map(|i| group(format!("g{i}"), 1, 1)).collect()),
            "Job.TaskGroups: 1001 task groups is over the limit of 1000",
        ),
        (
            job(vec![group("g".into(), 1, 1001)]),
            "Job.TaskGroups[0].Tasks: 1001 tasks is over the limit of 1000 per group",
        ),
        (
            job((0..3).map(|i| group(format!("g{i}"), 9_000, 1)).collect()),
            "Job.TaskGroups: 27000 allocations in all is over the limit of 20000 per job",
        ),
    ];
    for (body, said) in cases {
        let asked = std::time::Instant::now();
        for path in ["/v1/jobs", "/v1/job/big/plan"] {
            let (status, answer) = t.post(path, json!({ "Job": body })).await;
            assert_eq!(status, 400, "{path}: {answer}");
            assert!(answer.to_string().contains(said), "{path}: {answer}");
        }
        let (_, v) = t.post("/v1/validate/job", json!({ "Job": body })).await;
        assert!(v["ValidationErrors"].to_string().contains(said), "{v}");
        assert!(
            asked.elapsed() < Duration::from_secs(5),
            "{said}: {:?}",
            asked.elapsed()
        );
    }
    // Nothing was registered, and a job at the bounds is taken.
    assert_eq!(t.get("/v1/jobs").await.as_array().unwrap().len(), 0);
    let at = job(vec![json!({ "Name": "g", "Count": 2, "Tasks": [task] })]);
    let (status, answer) = t.post("/v1/jobs", json!({ "Job": at })).await;
    assert_eq!(status, 200, "{answer}");
}

/// Live allocations on the node are bounded (`client { max_live_allocs }`): a job that would
/// pass the bound with the others' live ones is a 400 naming it; once those end, it fits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_allocations_on_the_node_are_bounded() {
    let t = TestAgent::start("client {\n  max_live_allocs = 5\n}\n", vec![]).await;
    let job = |id: &str, count: u32, run_for: &str| {
        json!({ "ID": id, "Type": "batch", "TaskGroups": [{ "Name": "g", "Count": count,
            "Tasks": [{ "Name": "t", "Driver": "mock", "Config": { "run_for": run_for } }] }] })
    };
    let (status, answer) = t
        .post("/v1/jobs", json!({ "Job": job("first", 3, "3s") }))
        .await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = t
        .post("/v1/jobs", json!({ "Job": job("second", 3, "1s") }))
        .await;
    assert_eq!(status, 400, "{answer}");
    let said = answer.to_string();
    assert!(
        said.contains("Job.TaskGroups: its 3 allocations with the 3 live on the node make 6, over the limit of 5 live allocations per node"),
        "{said}"
    );
    // The job itself may grow up to the bound (its own allocations are not counted twice).
    let (status, answer) = t
        .post("/v1/jobs", json!({ "Job": job("first", 5, "3s") }))
        .await;
    assert_eq!(status, 200, "{answer}");
    t.wait_allocs(
        "first",
        Duration::from_secs(30),
        crate::harness::all_terminal,
    )
    .await;
    let (status, answer) = t
        .post("/v1/jobs", json!({ "Job": job("second", 3, "1s") }))
        .await;
    assert_eq!(status, 200, "{answer}");
}
