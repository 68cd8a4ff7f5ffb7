//! Job submissions (Nomad's `Submission` of a register request and
//! `GET /v1/job/{id}/submission?version=N`): the source a job version was submitted as,
//! kept per version in the state DB over a restart of the real agent, copied by a revert,
//! forgotten on purge, dropped with Nomad's warning when over the size limit, sent by
//! `agent job run`, and shown on the job's page in the UI.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{AgentProcess, TestAgent, agent_bin};

/// A batch job of one short mock task; `tag` changes its spec.
fn job(id: &str, tag: &str) -> Value {
    json!({ "ID": id, "Type": "batch", "Meta": { "tag": tag },
        "TaskGroups": [{ "Name": "g", "Tasks": [{ "Name": "t", "Driver": "mock",
            "Config": { "run_for": "10ms" } }] }] })
}

/// An HCL source as Nomad's CLI sends it.
fn hcl(id: &str, tag: &str) -> Value {
    json!({ "Source": format!("job \"{id}\" {{\n  meta {{ tag = \"{tag}\" }}\n}}\n"),
        "Format": "hcl2", "VariableFlags": { "tag": tag }, "Variables": "" })
}

/// `method path` with an optional JSON body on the agent process: status and body (JSON,
/// or the text as a JSON string).
async fn call(a: &AgentProcess, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut r = a
        .http
        .request(method.parse().unwrap(), a.url(path))
        .timeout(Duration::from_secs(30));
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn submission(a: &AgentProcess, id: &str, version: u64) -> (u16, Value) {
    call(
        a,
        "GET",
        &format!("/v1/job/{id}/submission?version={version}"),
        None,
    )
    .await
}

#[tokio::test]
async fn submissions_are_kept_per_version_over_a_restart_and_forgotten_on_purge() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = AgentProcess::new(dir.path());
    a.start().await;

    // Version 0 through /v1/jobs, version 1 through /v1/job/{id}.
    let (s, r) = call(
        &a,
        "POST",
        "/v1/jobs",
        Some(json!({ "Job": job("src", "one"), "Submission": hcl("src", "one") })),
    )
    .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["Warnings"], "");
    let (s, r) = call(
        &a,
        "POST",
        "/v1/job/src",
        Some(json!({ "Job": job("src", "two"), "Submission": hcl("src", "two") })),
    )
    .await;
    assert_eq!(s, 200, "{r}");
    // The same spec again makes no version, so its source is not kept (as in Nomad).
    let (s, _) = call(
        &a,
        "PUT",
        "/v1/jobs",
        Some(json!({ "Job": job("src", "two"), "Submission": hcl("src", "ignored") })),
    )
    .await;
    assert_eq!(s, 200);

    let versions = a.get("/v1/job/src/versions").await;
    let modify_of = |v: u64| {
        versions["Versions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["Version"] == v)
            .unwrap()["JobModifyIndex"]
            .clone()
    };
    let check = async |a: &AgentProcess| {
        for (v, tag) in [(0u64, "one"), (1, "two")] {
            let (s, sub) = submission(a, "src", v).await;
            assert_eq!(s, 200, "version {v}: {sub}");
            assert_eq!(sub["Source"], hcl("src", tag)["Source"], "version {v}");
            assert_eq!(sub["Format"], "hcl2");
            assert_eq!(sub["VariableFlags"], json!({ "tag": tag }));
            assert_eq!(sub["Variables"], "");
            assert_eq!(sub["JobID"], "src");
            assert_eq!(sub["Namespace"], "default");
            assert_eq!(sub["Version"], v);
            assert_eq!(sub["JobModifyIndex"], modify_of(v));
        }
        assert_eq!(
            submission(a, "src", 2).await,
            (404, json!("job source not found"))
        );
        let (s, _) = call(
            a,
            "GET",
            "/v1/job/src/submission?version=0&namespace=other",
            None,
        )
        .await;
        assert_eq!(s, 404, "another namespace's job of that id has none");
        for q in ["", "?version=", "?version=x", "?version=-1"] {
            let (s, body) = call(a, "GET", &format!("/v1/job/src/submission{q}"), None).await;
            assert_eq!(
                (s, body),
                (
                    400,
                    json!("Unable to parse job submission version parameter")
                ),
                "{q:?}"
            );
        }
    };
    check(&a).await;

    // The real agent's redb file keeps them over a restart.
    a.interrupt();
    a.start().await;
    check(&a).await;

    // A revert's new version keeps the source the reverted-to version was submitted as.
    let (s, r) = call(
        &a,
        "POST",
        "/v1/job/src/revert",
        Some(json!({ "JobID": "src", "JobVersion": 0 })),
    )
    .await;
    assert_eq!(s, 200, "{r}");
    let (s, sub) = submission(&a, "src", 2).await;
    assert_eq!(s, 200, "{sub}");
    assert_eq!(sub["VariableFlags"], json!({ "tag": "one" }));
    assert_eq!(sub["Version"], 2);

    // Purge forgets them; the id registered again starts without any.
    let (s, _) = call(&a, "DELETE", "/v1/job/src?purge=true", None).await;
    assert_eq!(s, 200);
    for v in 0..3 {
        assert_eq!(
            submission(&a, "src", v).await.0,
            404,
            "version {v} after purge"
        );
    }
    let (s, _) = call(
        &a,
        "POST",
        "/v1/jobs",
        Some(json!({ "Job": job("src", "one") })),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(submission(&a, "src", 0).await.0, 404);
    a.interrupt();
    a.start().await;
    assert_eq!(
        submission(&a, "src", 1).await.0,
        404,
        "nothing came back from the file"
    );
    a.interrupt();
}

#[tokio::test]
async fn an_oversized_source_is_dropped_with_nomads_warning_and_a_bad_one_is_a_400() {
    let t = TestAgent::start("", vec![]).await;
    // Source and flags count together: 999,990 + 6 + 5 bytes is over 1,000,000.
    let big = json!({ "Source": "#".repeat(999_990), "Format": "hcl2",
        "VariableFlags": { "abcdef": "12345" } });
    let (s, r) = t
        .post(
            "/v1/jobs",
            json!({ "Job": job("big", "x"), "Submission": big }),
        )
        .await;
    assert_eq!(s, 200, "{r}");
    // Nomad's `helper.MergeMultierrorWarnings` text.
    assert_eq!(
        r["Warnings"],
        "1 warning:\n\n* job source size of 1.0 MB exceeds maximum of 1.0 MB and will be discarded"
    );
    assert_eq!(
        t.get("/v1/job/big").await["ID"],
        "big",
        "the job is registered"
    );
    let (s, body) = t
        .send(
            reqwest::Method::GET,
            "/v1/job/big/submission?version=0",
            None,
        )
        .await;
    assert_eq!((s, body), (404, json!("job source not found")));
    // Exactly at the limit is kept.
    let fits = json!({ "Source": "#".repeat(1_000_000), "Format": "hcl2" });
    let (s, r) = t
        .post(
            "/v1/jobs",
            json!({ "Job": job("fits", "x"), "Submission": fits }),
        )
        .await;
    assert_eq!((s, &r["Warnings"]), (200, &json!("")), "{r}");
    let sub = t.get("/v1/job/fits/submission?version=0").await;
    assert_eq!(sub["Source"].as_str().unwrap().len(), 1_000_000);

    for (sub, field) in [
        (
            json!({ "Source": 7, "Format": "hcl2" }),
            "Submission.Source",
        ),
        (
            json!({ "Source": "x", "Format": "hcl2", "VariableFlags": ["a"] }),
            "Submission.VariableFlags",
        ),
        (
            json!({ "Source": "x", "Format": "hcl2", "Extra": 1 }),
            "Submission.Extra",
        ),
    ] {
        let (s, body) = t
            .post(
                "/v1/jobs",
                json!({ "Job": job("bad", "x"), "Submission": sub }),
            )
            .await;
        assert_eq!(s, 400, "{body}");
        assert!(body.as_str().unwrap().starts_with(field), "{field}: {body}");
    }
    let (s, _) = t.send(reqwest::Method::GET, "/v1/job/bad", None).await;
    assert_eq!(s, 404, "a refused registration registers nothing");
}

/// An HCL batch job `id` of one mock task whose env takes `var.greeting`; `group_lines` go
/// at the top of its group.
fn greeting_job(id: &str, group_lines: &str) -> String {
    format!(
        r#"job "{id}" {{
  type = "batch"
  group "g" {{
{group_lines}    task "t" {{
      driver = "mock"
      config {{
        run_for = "10ms"
      }}
      env {{
        GREETING = var.greeting
      }}
    }}
  }}
}}
"#
    )
}

/// The text of the UI page at `path`.
async fn ui_page(t: &TestAgent, path: &str) -> String {
    let r = t.http.get(t.url(path)).send().await.unwrap();
    r.text().await.unwrap()
}

/// `agent job run <args> -address <t>`.
async fn job_run(t: &TestAgent, args: &[&str]) -> std::process::Output {
    let out = tokio::process::Command::new(agent_bin())
        .args(["job", "run", "--detach", "-address", &t.base])
        .args(args)
        .env_remove("NOMAD_ADDR")
        .env_remove("NOMAD_TOKEN")
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    out
}

#[tokio::test]
async fn job_run_sends_the_source_and_the_job_page_shows_the_hcl() {
    let t = TestAgent::start("", vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    // Text that is markup if it is not escaped.
    let source = r#"# A job whose source says <b>bold</b> & "quoted" things.
variable "greeting" {
  type    = string
  default = "hello"
}

"#
    .to_string()
        + &greeting_job("from-hcl", "");
    let file = dir.path().join("from-hcl.nomad.hcl");
    std::fs::write(&file, &source).unwrap();
    job_run(&t, &["--var", "greeting=<hi>", file.to_str().unwrap()]).await;

    let sub = t.get("/v1/job/from-hcl/submission?version=0").await;
    assert_eq!(sub["Source"], source);
    assert_eq!(sub["Format"], "hcl2");
    assert_eq!(sub["VariableFlags"], json!({ "greeting": "<hi>" }));
    assert_eq!(sub["Variables"], "");
    let registered = t.get("/v1/job/from-hcl").await;
    assert_eq!(
        registered["TaskGroups"][0]["Tasks"][0]["Env"]["GREETING"],
        "<hi>"
    );

    // The job page shows the HCL beside the JSON, escaped.
    let page = ui_page(&t, "/ui/jobs/from-hcl?namespace=default").await;
    assert!(page.contains("Job JSON"), "{page}");
    assert!(page.contains("Job HCL (version 0, as submitted)"), "{page}");
    assert!(
        page.contains(
            "# A job whose source says &lt;b&gt;bold&lt;/b&gt; &amp; &quot;quoted&quot; things."
        ),
        "{page}"
    );
    assert!(page.contains("job &quot;from-hcl&quot; {"), "{page}");
    assert!(!page.contains("<b>bold</b>"), "the source is escaped");
    assert!(
        page.contains("<dt>greeting</dt><dd><code>&lt;hi&gt;</code></dd>"),
        "{page}"
    );

    // A JSON job file is sent as `json`; its page has no HCL section.
    let json_file = dir.path().join("plain.json");
    let text = serde_json::to_string_pretty(&json!({ "Job": job("plain", "j") })).unwrap();
    std::fs::write(&json_file, &text).unwrap();
    job_run(&t, &[json_file.to_str().unwrap()]).await;
    let sub = t.get("/v1/job/plain/submission?version=0").await;
    assert_eq!(
        (&sub["Format"], &sub["Source"]),
        (&json!("json"), &json!(text))
    );
    assert_eq!(sub["VariableFlags"], Value::Null);
    let page = ui_page(&t, "/ui/jobs/plain").await;
    assert!(page.contains("Job JSON"), "{page}");
    assert!(!page.contains("Job HCL"), "{page}");

    // A new version registered without a source: the page shows only the JSON.
    let mut v1 = t.get("/v1/job/from-hcl").await;
    v1["Meta"] = json!({ "changed": "yes" });
    let (s, r) = t.post("/v1/jobs", json!({ "Job": v1 })).await;
    assert_eq!(s, 200, "{r}");
    let page = ui_page(&t, "/ui/jobs/from-hcl").await;
    assert!(page.contains("<dd>1</dd>"), "version 1 shows: {page}");
    assert!(!page.contains("Job HCL"), "{page}");
}

#[tokio::test]
async fn reading_a_submission_takes_read_job_in_its_namespace() {
    let t = TestAgent::start(
        "acl {\n  enabled = true\n  token = \"mgmt-s3cret\"\n}\n",
        vec![],
    )
    .await;
    let as_token = |secret: &str, method: reqwest::Method, path: &str, body: Option<Value>| {
        let mut r = t
            .http
            .request(method, t.url(path))
            .header("X-Nomad-Token", secret);
        if let Some(b) = body {
            r = r.json(&b);
        }
        async move {
            let r = r.send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let (s, b) = as_token(
        "mgmt-s3cret",
        reqwest::Method::POST,
        "/v1/jobs",
        Some(json!({ "Job": job("secret-src", "x"), "Submission": hcl("secret-src", "x") })),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let mut tokens = Vec::new();
    for (name, rules) in [
        ("reader", r#"namespace "default" { policy = "read" }"#),
        ("elsewhere", r#"namespace "other" { policy = "write" }"#),
    ] {
        let (s, b) = as_token(
            "mgmt-s3cret",
            reqwest::Method::POST,
            &format!("/v1/acl/policy/{name}"),
            Some(json!({ "Name": name, "Rules": rules })),
        )
        .await;
        assert_eq!(s, 200, "{b}");
        let (s, b) = as_token(
            "mgmt-s3cret",
            reqwest::Method::POST,
            "/v1/acl/token",
            Some(json!({ "Name": name, "Type": "client", "Policies": [name] })),
        )
        .await;
        assert_eq!(s, 200, "{b}");
        let v: Value = serde_json::from_str(&b).unwrap();
        tokens.push(v["SecretID"].as_str().unwrap().to_string());
    }
    let path = "/v1/job/secret-src/submission?version=0";
    let (s, b) = as_token(&tokens[0], reqwest::Method::GET, path, None).await;
    assert_eq!(s, 200, "{b}");
    assert!(b.contains("secret-src"), "{b}");
    assert_eq!(
        as_token(&tokens[1], reqwest::Method::GET, path, None).await,
        (403, "Permission denied".to_string())
    );
    let (s, _) = t
        .http
        .get(t.url(path))
        .send()
        .await
        .map(|r| (r.status().as_u16(), ()))
        .unwrap();
    assert_eq!(s, 403, "anonymous");
}

/// `agent run --job FILE` (README's first command) keeps the file's text with the job's
/// version, as `agent job run` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_run_with_a_job_file_keeps_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/jobs/hello.nomad.hcl");
    let mut a = AgentProcess::new(dir.path());
    a.args = vec!["--job".into(), file.display().to_string()];
    a.start().await;
    let (status, sub) = submission(&a, "hello-hcl", 0).await;
    assert_eq!(status, 200, "{sub}");
    assert_eq!(sub["Format"], "hcl2");
    assert_eq!(sub["Source"], std::fs::read_to_string(&file).unwrap());
    a.interrupt();
}

#[tokio::test]
async fn job_run_takes_var_files_under_var_flags_and_sends_their_text() {
    let t = TestAgent::start("", vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    let source = r#"variable "greeting" {
  type = string
}
variable "count" {
  type    = number
  default = 1
}

"#
    .to_string()
        + &greeting_job("var-files", "    count = var.count\n");
    let file = dir.path().join("job.nomad.hcl");
    std::fs::write(&file, &source).unwrap();
    let first = "# shared values\ngreeting = \"from the first file\"\ncount = 2\n";
    let second = "greeting = \"from the second file\"";
    let (f1, f2) = (dir.path().join("one.hcl"), dir.path().join("two.hcl"));
    std::fs::write(&f1, first).unwrap();
    std::fs::write(&f2, second).unwrap();
    let flag = |p: &std::path::Path| format!("-var-file={}", p.display());

    // Nomad's single-dash form, repeated: the later file wins where both set a value.
    job_run(&t, &[&flag(&f1), &flag(&f2), file.to_str().unwrap()]).await;
    let registered = t.get("/v1/job/var-files").await;
    let group = &registered["TaskGroups"][0];
    assert_eq!(group["Tasks"][0]["Env"]["GREETING"], "from the second file");
    assert_eq!(
        group["Count"], 2,
        "the first file's value stays where only it sets one"
    );
    let sub = t.get("/v1/job/var-files/submission?version=0").await;
    assert_eq!(sub["Source"], source);
    assert_eq!(sub["Variables"], format!("{first}\n{second}\n"));
    assert_eq!(sub["VariableFlags"], Value::Null);

    // A -var flag wins over every file, whatever the order on the command line.
    let args = [
        "-var",
        "greeting=from the flag",
        &flag(&f1),
        file.to_str().unwrap(),
    ];
    job_run(&t, &args).await;
    let registered = t.get("/v1/job/var-files").await;
    assert_eq!(registered["Version"], 1);
    let group = &registered["TaskGroups"][0];
    assert_eq!(group["Tasks"][0]["Env"]["GREETING"], "from the flag");
    let sub = t.get("/v1/job/var-files/submission?version=1").await;
    assert_eq!(sub["Variables"], format!("{first}\n"));
    assert_eq!(sub["VariableFlags"], json!({ "greeting": "from the flag" }));

    // A var file setting a variable the job does not declare is refused, naming it.
    let bad = dir.path().join("bad.hcl");
    std::fs::write(&bad, "greeting = \"x\"\nnope = 1\n").unwrap();
    let out = tokio::process::Command::new(agent_bin())
        .args(["job", "run", "--detach", "-address", &t.base, &flag(&bad)])
        .arg(&file)
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("var.nope"),
        "{out:?}"
    );
}

#[tokio::test]
async fn job_run_reads_nomad_var_environment_under_var_files_and_flags() {
    let t = TestAgent::start("", vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    let source = "variable \"greeting\" {\n  type = string\n}\nvariable \"count\" {\n  type    = number\n  default = 1\n}\n\n".to_string()
        + &greeting_job("env-vars", "    count = var.count\n");
    let file = dir.path().join("job.nomad.hcl");
    std::fs::write(&file, &source).unwrap();
    let run = |extra: &[&str]| {
        tokio::process::Command::new(agent_bin())
            .args(["job", "run", "--detach", "-address", &t.base])
            .args(extra)
            .arg(&file)
            .env_remove("NOMAD_ADDR")
            .env_remove("NOMAD_TOKEN")
            // Another job's variable in the environment is no error.
            .envs([
                ("NOMAD_VAR_greeting", "from the env"),
                ("NOMAD_VAR_count", "3"),
                ("NOMAD_VAR_not_this_jobs", "x"),
            ])
            .output()
    };
    let out = run(&[]).await.unwrap();
    assert!(out.status.success(), "{out:?}");
    let group = &t.get("/v1/job/env-vars").await["TaskGroups"][0];
    assert_eq!(group["Tasks"][0]["Env"]["GREETING"], "from the env");
    assert_eq!(group["Count"], 3);
    // Not part of what is submitted, as in Nomad.
    let sub = t.get("/v1/job/env-vars/submission?version=0").await;
    assert_eq!(sub["VariableFlags"], Value::Null);

    // A -var flag is over the environment; the environment still gives the rest.
    let out = run(&["-var", "greeting=from the flag"]).await.unwrap();
    assert!(out.status.success(), "{out:?}");
    let group = &t.get("/v1/job/env-vars").await["TaskGroups"][0];
    assert_eq!(group["Tasks"][0]["Env"]["GREETING"], "from the flag");
    assert_eq!(group["Count"], 3);
}
