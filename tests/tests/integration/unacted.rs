//! Nothing silently dropped: a job written for Nomad, with blocks this agent does not act
//! on, is registered with each one named in `Warnings` (register, plan, validate), reads
//! back with them, and is refused naming them when the operator says so.

use serde_json::{Value, json};

use crate::harness::TestAgent;

/// The service job from Nomad's docs the issue was found with, in HCL.
const WEB: &str = r#"
job "web" {
  update {
    canary      = 1
    auto_revert = true
  }
  group "web" {
    reschedule {
      delay     = "30s"
      unlimited = true
    }
    volume "data" {
      type   = "csi"
      source = "data"
    }
    service {
      name = "web"
      check {
        type     = "http"
        path     = "/health"
        interval = "10s"
        timeout  = "2s"
      }
    }
    task "server" {
      driver = "mock"
      config {
        run_for = "30s"
      }
      artifact {
        source = "https://example.com/app.tar.gz"
        chown  = true
      }
      template {
        data        = "x"
        destination = "local/x"
        change_mode = "script"
        change_script {
          command             = "/bin/true"
          fail_on_error       = true
          run_on_first_render = true
        }
      }
    }
  }
}
"#;

const NAMED: &[&str] = &[
    "Job.TaskGroups[0].Services[0].Provider: no Consul here: registered with this agent's own service discovery",
    "Job.TaskGroups[0].Volumes[\"data\"].Type: no CSI here",
    "Job.TaskGroups[0].Tasks[0].Artifacts[0].Chown: not supported by this agent yet",
    // The script itself is run; only its first-render run is not.
    "Job.TaskGroups[0].Tasks[0].Templates[0].ChangeScript.RunOnFirstRender: not supported by this agent yet",
];

/// The HCL job as the agent's parse endpoint turns it into JSON (what `nomad job run`
/// sends after `/v1/jobs/parse`).
async fn parsed(t: &TestAgent) -> Value {
    let (s, job) = t.post("/v1/jobs/parse", json!({ "JobHCL": WEB })).await;
    assert_eq!(s, 200, "{job}");
    job
}

fn names_each(warnings: &Value) {
    let text = warnings.as_str().unwrap_or_default();
    assert!(text.starts_with("4 warnings:\n"), "{text}");
    assert!(
        !text.contains("Update"),
        "a service job's update is acted on: {text}"
    );
    for n in NAMED {
        assert!(
            text.contains(&format!("\n* {n}")),
            "{n} is not named in:\n{text}"
        );
    }
}

#[tokio::test]
async fn each_block_not_acted_on_is_named_in_register_plan_and_validate_and_reads_back() {
    let t = TestAgent::start("", vec![]).await;
    let job = parsed(&t).await;
    // The HCL's blocks survived the parse in Nomad's shape.
    assert_eq!(job["Update"]["Canary"], 1);
    assert_eq!(
        job["TaskGroups"][0]["ReschedulePolicy"]["Delay"],
        30_000_000_000u64
    );
    assert_eq!(
        job["TaskGroups"][0]["Services"][0]["Checks"][0]["Interval"],
        10_000_000_000u64
    );
    assert_eq!(job["TaskGroups"][0]["Volumes"]["data"]["Source"], "data");
    assert_eq!(
        job["TaskGroups"][0]["Tasks"][0]["Artifacts"][0]["GetterSource"],
        "https://example.com/app.tar.gz"
    );

    let (s, plan) = t.post("/v1/job/web/plan", json!({ "Job": job })).await;
    assert_eq!(s, 200, "{plan}");
    names_each(&plan["Warnings"]);
    let (s, v) = t.post("/v1/validate/job", json!({ "Job": job })).await;
    assert_eq!(s, 200, "{v}");
    names_each(&v["Warnings"]);
    assert_eq!(v["ValidationErrors"], json!([]));

    let (s, reg) = t.post("/v1/jobs", json!({ "Job": job })).await;
    assert_eq!(s, 200, "{reg}");
    names_each(&reg["Warnings"]);
    // Registered and run as before, the blocks kept as given.
    let back = t.get("/v1/job/web").await;
    assert_eq!(back["Update"]["AutoRevert"], true);
    // The job's `update` is its group's deployment strategy, Nomad's defaults merged.
    let u = &back["TaskGroups"][0]["Update"];
    assert_eq!(
        (&u["Canary"], &u["AutoRevert"], &u["MaxParallel"]),
        (&json!(1), &json!(true), &json!(1))
    );
    assert_eq!(u["MinHealthyTime"], 10_000_000_000u64);
    assert_eq!(back["TaskGroups"][0]["Services"][0]["Name"], "web");
    t.eval_done(reg["EvalID"].as_str().unwrap()).await;
    assert_eq!(
        t.get("/v1/job/web/allocations")
            .await
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // A job asking for nothing unsupported has no warnings.
    let (s, reg) = t
        .post(
            "/v1/jobs",
            json!({ "Job": crate::harness::mock_job("plain", json!({})) }),
        )
        .await;
    assert_eq!(s, 200, "{reg}");
    assert_eq!(reg["Warnings"], "");
}

#[tokio::test]
async fn error_mode_refuses_the_job_naming_each_block_and_keeps_nothing() {
    let t = TestAgent::start(
        "client {\n  unsupported_job_features = \"error\"\n}\n",
        vec![],
    )
    .await;
    let job = parsed(&t).await;
    for path in ["/v1/jobs", "/v1/job/web/plan"] {
        let (s, body) = t.post(path, json!({ "Job": job })).await;
        assert_eq!(s, 400, "{path}: {body}");
        let text = body.as_str().unwrap_or_default();
        assert!(text.contains("client.unsupported_job_features"), "{text}");
        for n in NAMED {
            assert!(text.contains(n), "{path}: {n} is not named in:\n{text}");
        }
    }
    let (s, _) = t.send(reqwest::Method::GET, "/v1/job/web", None).await;
    assert_eq!(s, 404, "a refused job was registered");
    let (s, v) = t.post("/v1/validate/job", json!({ "Job": job })).await;
    assert_eq!(s, 200);
    let errors = v["ValidationErrors"].to_string();
    assert!(
        errors.contains("Job.TaskGroups[0].Services[0].Provider"),
        "{errors}"
    );
    // A job with nothing unsupported registers as ever.
    let (s, _) = t
        .post(
            "/v1/jobs",
            json!({ "Job": crate::harness::mock_job("plain", json!({})) }),
        )
        .await;
    assert_eq!(s, 200);
}

#[test]
fn a_bad_mode_stops_the_agent_naming_the_key() {
    let e = paddock::config::AgentConfig::parse(
        "client {\n  unsupported_job_features = \"ignore\"\n}\n",
        "x.hcl",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("unsupported_job_features"), "{e}");
}
