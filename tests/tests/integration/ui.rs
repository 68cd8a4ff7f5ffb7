//! The web UI at `/ui`: every page read over plain HTTP (no script needed for what it
//! shows), the token gate and its cookie, and the end-to-end run in headless Chromium
//! (`tests/ui/e2e.mjs`, driven by playwright-core) with screenshots under
//! `target/ui-screenshots/`.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{TestAgent, mock_job, repo_root};

mod components;
mod permissions;

/// A raw_exec service job that prints a numbered line every second.
fn ticker(id: &str) -> Value {
    // Its deployment stays running through a test (a minute to turn healthy).
    let update = json!({ "MinHealthyTime": 60_000_000_000u64, "HealthyDeadline": 120_000_000_000u64,
        "ProgressDeadline": 180_000_000_000u64 });
    json!({ "ID": id, "Type": "service", "TaskGroups": [{ "Name": "g", "Count": 1, "Update": update, "Tasks": [{
        "Name": "t", "Driver": "raw_exec",
        "Config": { "command": "/bin/sh", "args": ["-c", "i=0; while true; do i=$((i+1)); echo \"tick $i\"; sleep 1; done"] },
        "Resources": { "CPU": 50, "MemoryMB": 32 } }] }] })
}

/// A client that does not follow redirects, so they can be checked.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// `GET path`: status, headers and the page.
async fn page(
    t: &TestAgent,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, String) {
    let mut req = client().get(t.url(path));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = req.send().await.unwrap();
    let (status, h) = (r.status().as_u16(), r.headers().clone());
    (status, h, r.text().await.unwrap())
}

async fn running_alloc(t: &TestAgent, job: &str) -> String {
    let allocs = t
        .wait_allocs(job, Duration::from_secs(30), |a| {
            a.iter().any(|a| a["TaskStates"]["t"]["State"] == "running")
        })
        .await;
    allocs[0]["ID"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn every_page_renders_on_the_server() {
    let t = TestAgent::start("", vec![]).await;
    let mut job = ticker("ticker");
    job["TaskGroups"][0]["Tasks"][0]["Resources"]["Devices"] =
        json!([{ "Name": "paddock/mock", "Count": 1 }]);
    t.register(job).await;
    let alloc = running_alloc(&t, "ticker").await;
    // A job no node can hold: its evaluation's placement failure shows on its page.
    let mut big = ticker("too-big");
    big["TaskGroups"][0]["Tasks"][0]["Resources"]["MemoryMB"] = json!(50_000_000);
    t.register(big).await;

    let (status, h, _) = page(&t, "/ui", &[]).await;
    assert_eq!(status, 303, "/ui redirects");
    assert_eq!(h["location"], "/ui/jobs");

    let (status, h, jobs) = page(&t, "/ui/jobs", &[]).await;
    assert_eq!(status, 200);
    assert!(h["content-type"].to_str().unwrap().starts_with("text/html"));
    assert!(jobs.contains("<h1>Jobs</h1>"), "{jobs}");
    assert!(
        jobs.contains(r#"href="/ui/jobs/ticker?namespace=default""#),
        "{jobs}"
    );
    assert!(
        jobs.contains("1 running"),
        "the allocation bar counts it: {jobs}"
    );
    assert!(jobs.contains(r#"<label for="q">Search</label>"#), "{jobs}");
    let (_, _, filtered) = page(&t, "/ui/jobs?q=big", &[]).await;
    assert!(filtered.contains("too-big") && !filtered.contains("/ui/jobs/ticker?"));
    let (_, _, other_ns) = page(&t, "/ui/jobs?namespace=prod", &[]).await;
    assert!(other_ns.contains("No jobs match the filter"), "{other_ns}");

    let (status, _, job) = page(&t, "/ui/jobs/ticker?namespace=default", &[]).await;
    assert_eq!(status, 200);
    for want in [
        "Task groups",
        "Allocations",
        "Evaluations",
        "Job JSON",
        "job-register",
        // The service job's first deployment, running, with its fail button (this agent
        // has no ACL: every call would pass).
        r#"aria-label="Latest deployment""#,
        "Deployment is running",
        r#"data-url="/v1/deployment/fail/"#,
    ] {
        assert!(job.contains(want), "job page lacks {want}: {job}");
    }
    assert!(job.contains(&format!("/ui/allocations/{alloc}")), "{job}");
    let (_, _, big) = page(&t, "/ui/jobs/too-big", &[]).await;
    assert!(
        big.contains(r#"<ul class="failures">"#) && big.contains("memory"),
        "the placement failure names memory: {big}"
    );

    let (status, _, a) = page(&t, &format!("/ui/allocations/{alloc}"), &[]).await;
    assert_eq!(status, 200);
    for want in [
        "Task t",
        r#"data-event="Received""#,
        r#"data-event="Task Setup""#,
        r#"data-event="Started""#,
        "Restart</button>",
        "Send signal</button>",
        "Stop allocation</button>",
        r#"data-logs=""#,
        "32 MiB",
        "<h3>Devices</h3>",
        "paddock/mock/mock-device: <code>mock-",
    ] {
        assert!(a.contains(want), "allocation page lacks {want}: {a}");
    }
    // Its resource charts: the sampler takes one a second; the first reading only starts
    // the CPU rate, so the second tick draws the first point.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, _, a) = page(&t, &format!("/ui/allocations/{alloc}"), &[]).await;
        if a.contains(r#"data-chart="memory" data-points="0""#) {
            assert!(std::time::Instant::now() < deadline, "no samples: {a}");
            tokio::time::sleep(Duration::from_millis(300)).await;
            continue;
        }
        assert!(
            a.contains("</strong> of 50 MHz reserved")
                && a.contains("</strong> of 32 MiB reserved"),
            "{a}"
        );
        assert!(a.contains("<circle"), "{a}");
        break;
    }
    // A unique prefix of the id finds it too.
    let (status, _, _) = page(&t, &format!("/ui/allocations/{}", &alloc[..8]), &[]).await;
    assert_eq!(status, 200);

    let (status, _, node) = page(&t, "/ui/node", &[]).await;
    assert_eq!(status, 200);
    assert!(node.contains(r#"<tr data-driver="raw_exec">"#), "{node}");
    assert!(node.contains("kernel.name"), "attributes: {node}");
    assert!(
        node.contains("<td>paddock/mock/mock-device</td><td><code>mock-0</code></td>"),
        "device instances: {node}"
    );
    assert!(node.contains(r#"<span class="status healthy">healthy</span>"#));
    // The ticker's share of the node, by what it reserved (50 MHz, 32 MiB).
    assert!(
        node.contains(&format!(r#"<tr data-alloc="{alloc}">"#))
            && node.contains("50 MHz (")
            && node.contains("32 MiB ("),
        "the node's allocations by share: {node}"
    );
    assert!(
        node.contains(r#"data-chart="cpu""#) && node.contains(r#"data-chart="memory""#),
        "{node}"
    );

    // The editor: a new job starts from the example; an existing one opens its JSON.
    let (status, _, new) = page(&t, "/ui/run", &[]).await;
    assert_eq!(status, 200);
    assert!(
        new.contains("<h1>Run a job</h1>") && new.contains("job &quot;example&quot;"),
        "{new}"
    );
    let (status, _, edit) = page(&t, "/ui/run?job=ticker&namespace=default", &[]).await;
    assert_eq!(status, 200);
    assert!(
        edit.contains("<h1>Edit job ticker</h1>") && edit.contains("&quot;Job&quot;: {"),
        "{edit}"
    );
    assert_eq!(page(&t, "/ui/run?job=nope", &[]).await.0, 404);

    let (status, _, comps) = page(&t, "/ui/components", &[]).await;
    assert_eq!(status, 200);
    assert!(comps.contains(r#"data-component="raw_exec""#), "{comps}");
    assert!(comps.contains("Latency p50 / p99"), "{comps}");

    for (path, code) in [
        ("/ui/jobs/nope", 404),
        ("/ui/allocations/nope", 404),
        ("/ui/assets/nope.js", 404),
    ] {
        assert_eq!(page(&t, path, &[]).await.0, code, "{path}");
    }
    let (status, h, js) = page(&t, "/ui/assets/ui.js", &[]).await;
    assert_eq!(status, 200);
    assert!(
        h["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
    assert!(js.contains("X-Nomad-Token"));
    let (status, _, css) = page(&t, "/ui/assets/ui.css", &[]).await;
    assert_eq!(status, 200);
    assert!(css.contains("@media"));
}

#[tokio::test]
async fn the_timeline_names_restart_delays_exit_codes_and_the_failing_driver() {
    let t = TestAgent::start("", vec![]).await;
    t.post_job(json!({ "ID": "exits", "Type": "batch", "TaskGroups": [{ "Name": "g",
        "RestartPolicy": { "Attempts": 1, "Delay": 1_000_000_000u64, "Mode": "fail", "Interval": 600_000_000_000u64 },
        "Tasks": [{ "Name": "t", "Driver": "raw_exec", "Config": { "command": "/bin/sh", "args": ["-c", "exit 3"] } }] }] }))
        .await;
    t.post_job(mock_job(
        "trap",
        json!({"misbehave": {"op": "start", "kind": "trap"}}),
    ))
    .await;
    for (job, wants) in [
        (
            "exits",
            &[
                r#"data-event="Terminated""#,
                "Exit Code: 3",
                r#"data-event="Restarting""#,
                "<span class=\"msg\">Task restarting in 1",
                r#"data-event="Not Restarting""#,
            ][..],
        ),
        (
            "trap",
            &[
                r#"data-event="Driver Failure""#,
                "&quot;mock&quot;",
                "trapped",
            ][..],
        ),
    ] {
        let a = t.finished_alloc(job).await;
        let (status, h, body) = page(
            &t,
            &format!("/ui/allocations/{}", a["ID"].as_str().unwrap()),
            &[],
        )
        .await;
        assert_eq!(status, 200);
        assert!(
            h["content-security-policy"]
                .to_str()
                .unwrap()
                .contains("frame-ancestors 'none'")
        );
        for want in wants {
            assert!(body.contains(want), "{job}: the page lacks {want}: {body}");
        }
    }
}

#[tokio::test]
async fn a_token_protected_agent_asks_for_the_token_and_keeps_it_to_the_pages() {
    let t = TestAgent::start("acl {\n  token = \"ui-s3cret\"\n}\n", vec![]).await;
    let (status, _, body) = page(&t, "/ui/jobs", &[]).await;
    assert_eq!(status, 403);
    assert!(body.contains("403: Permission denied"), "{body}");
    assert!(
        body.contains(r#"<label for="token">ACL token</label>"#),
        "{body}"
    );
    assert!(body.contains(r#"name="next" value="/ui/jobs""#), "{body}");

    // The header the API takes works for the pages too.
    let (status, _, _) = page(&t, "/ui/node", &[("X-Nomad-Token", "ui-s3cret")]).await;
    assert_eq!(status, 200);

    let url = t.url("/ui/login");
    let login = |token: &'static str, next: &'static str| {
        client()
            .post(url.clone())
            .form(&[("token", token), ("next", next)])
            .send()
    };
    let r = login("wrong", "/ui/node").await.unwrap();
    assert_eq!(r.status(), 403);
    assert!(r.headers().get("set-cookie").is_none());
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("the ACL token is not valid")
    );

    let r = login("ui-s3cret", "/ui/node").await.unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/ui/node");
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    for part in [
        "paddock_ui_token=ui-s3cret",
        "Path=/ui",
        "HttpOnly",
        "SameSite=Strict",
    ] {
        assert!(cookie.contains(part), "{cookie}");
    }
    let pair = cookie.split(';').next().unwrap().to_string();
    let (status, _, body) = page(&t, "/ui/node", &[("Cookie", &pair)]).await;
    assert_eq!(status, 200, "{body}");
    // The cookie is a key to the pages only: the API still wants the header.
    let r = client()
        .get(t.url("/v1/jobs"))
        .header("Cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    // After signing in, only this agent's pages are a place to go.
    let r = login("ui-s3cret", "https://elsewhere.example/")
        .await
        .unwrap();
    assert_eq!(r.headers()["location"], "/ui/jobs");

    let r = client().post(t.url("/ui/logout")).send().await.unwrap();
    assert_eq!(r.status(), 303);
    assert!(
        r.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
}

#[tokio::test]
async fn with_acl_policies_the_jobs_list_shows_the_namespaces_a_token_reads() {
    let t = TestAgent::start(
        "acl {\n  enabled = true\n  token = \"ui-mgmt\"\n}\n",
        vec![],
    )
    .await;
    let mgmt = |path: &str, body: Value| {
        client()
            .post(t.url(path))
            .header("X-Nomad-Token", "ui-mgmt")
            .json(&body)
            .send()
    };
    let r = mgmt("/v1/namespace/prod", json!({ "Name": "prod" }))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    for (id, ns) in [("mine", "default"), ("theirs", "prod")] {
        let job = json!({ "ID": id, "Namespace": ns, "Type": "batch", "TaskGroups": [{ "Name": "g",
            "Tasks": [{ "Name": "t", "Driver": "raw_exec", "Config": { "command": "true" } }] }] });
        let r = mgmt("/v1/jobs", json!({ "Job": job })).await.unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    }
    let rules = "namespace \"default\" {\n  policy = \"read\"\n}\n";
    let r = mgmt(
        "/v1/acl/policy/reader",
        json!({ "Name": "reader", "Rules": rules }),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let r = mgmt(
        "/v1/acl/token",
        json!({ "Name": "ui", "Type": "client", "Policies": ["reader"] }),
    )
    .await
    .unwrap();
    let token: Value = r.json().await.unwrap();
    let reader = token["SecretID"].as_str().unwrap();

    let (status, _, body) = page(&t, "/ui/jobs", &[("X-Nomad-Token", reader)]).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("/ui/jobs/mine?"), "{body}");
    assert!(
        !body.contains("theirs"),
        "a namespace the token cannot read: {body}"
    );
    let (status, _, body) = page(&t, "/ui/jobs", &[("X-Nomad-Token", "ui-mgmt")]).await;
    assert_eq!(status, 200);
    assert!(body.contains("/ui/jobs/theirs?namespace=prod"), "{body}");
    for (path, token, want) in [
        ("/ui/jobs?namespace=prod", Some(reader), 403),
        ("/ui/jobs/theirs?namespace=prod", Some(reader), 403),
        ("/ui/jobs/mine", Some(reader), 200),
        ("/ui/jobs", None, 403),
    ] {
        let headers: Vec<(&str, &str)> = token.map(|t| ("X-Nomad-Token", t)).into_iter().collect();
        assert_eq!(page(&t, path, &headers).await.0, want, "{path}");
    }
}

/// Why the browser test cannot run here, or None when it can.
fn browser_missing(ui: &std::path::Path) -> Option<String> {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    if !std::path::Path::new(&chromium).exists() {
        return Some(format!(
            "no Chromium at {chromium} (apt-get install chromium)"
        ));
    }
    if Command::new("node").arg("--version").output().is_err() {
        return Some("no node on PATH".into());
    }
    let installed = ["playwright-core", "@xterm/xterm", "@xterm/addon-fit"]
        .iter()
        .all(|p| ui.join("node_modules").join(p).exists());
    if !installed {
        let ok = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(ui)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return Some("npm ci in tests/ui failed (playwright-core, @xterm)".into());
        }
    }
    None
}

#[tokio::test]
async fn browser_end_to_end() {
    let root = repo_root();
    let ui = root.join("tests/ui");
    if let Some(why) = browser_missing(&ui) {
        eprintln!("\n**********\nSKIPPED ui::browser_end_to_end: {why}\n**********\n");
        return;
    }
    // The terminal emulator the UI serves is the pinned npm packages' own files.
    for (vendored, package) in [
        ("xterm.js", "@xterm/xterm/lib/xterm.js"),
        ("xterm.css", "@xterm/xterm/css/xterm.css"),
        ("addon-fit.js", "@xterm/addon-fit/lib/addon-fit.js"),
    ] {
        let ours = std::fs::read(root.join("host/src/ui/assets/vendor").join(vendored)).unwrap();
        let theirs = std::fs::read(ui.join("node_modules").join(package)).unwrap();
        assert!(
            ours == theirs,
            "host/src/ui/assets/vendor/{vendored} is not {package} as tests/ui/package-lock.json pins it: copy it again"
        );
    }
    let open = TestAgent::start("", vec![]).await;
    let guarded = TestAgent::start("acl {\n  token = \"e2e-s3cret\"\n}\n", vec![]).await;
    let shots: PathBuf = root.join("target/ui-screenshots");
    let out = tokio::process::Command::new("node")
        .arg(ui.join("e2e.mjs"))
        .env("UI_BASE", &open.base)
        .env("UI_TOKEN_BASE", &guarded.base)
        .env("UI_TOKEN", "e2e-s3cret")
        .env("UI_SHOTS", &shots)
        .current_dir(&ui)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(240), out)
        .await
        .expect("the browser run took over 4 minutes")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("passed, 0 failed"), "{stdout}");
    for shot in [
        "jobs",
        "job",
        "allocation",
        "node",
        "components",
        "login",
        "jobs-narrow",
        "exec",
    ] {
        assert!(
            shots.join(format!("{shot}.png")).exists(),
            "no screenshot {shot}"
        );
    }
}
