//! Nomad Variables: the `/v1/var(s)` API in Nomad's shape over real HTTP, kept in the
//! redb state DB across a restart of the real binary, and read by the `template` hook
//! within what the task's workload identity allows.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{AgentProcess, TestAgent, stdout_of};

/// A request's status, `X-Nomad-Index` and body (JSON when it parses, else the text).
async fn send(r: reqwest::RequestBuilder) -> (u16, u64, Value) {
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    let index = r
        .headers()
        .get("X-Nomad-Index")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let text = r.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, index, body)
}

fn put(http: &reqwest::Client, url: String, items: Value) -> reqwest::RequestBuilder {
    http.put(url).json(&json!({ "Items": items }))
}

#[tokio::test]
async fn variables_are_written_read_listed_and_deleted_with_check_and_set() {
    let t = TestAgent::start("", vec![]).await;
    let h = &t.http;
    let (status, _, body) = send(h.get(t.url("/v1/var/app/db"))).await;
    assert_eq!((status, body), (404, json!("variable not found")));

    // cas=0: create only.
    let (status, index, v1) = send(put(
        h,
        t.url("/v1/var/app/db?cas=0"),
        json!({"user": "admin"}),
    ))
    .await;
    assert_eq!(status, 200, "{v1}");
    assert_eq!(v1["Namespace"], "default");
    assert_eq!(v1["Path"], "app/db");
    assert_eq!(v1["Items"], json!({"user": "admin"}));
    let m1 = v1["ModifyIndex"].as_u64().unwrap();
    assert!(
        m1 > 0 && v1["CreateIndex"] == m1 && index == m1,
        "{v1} {index}"
    );
    assert!(v1["CreateTime"].as_i64().unwrap() > 0);
    let (status, index, conflict) =
        send(put(h, t.url("/v1/var/app/db?cas=0"), json!({"user": "x"}))).await;
    assert_eq!((status, index), (409, m1), "{conflict}");
    assert_eq!(conflict, v1, "a conflict answers the variable as it is");

    // cas=N: only over ModifyIndex N.
    let url = t.url(&format!("/v1/var/app/db?cas={m1}"));
    let (status, _, v2) = send(put(h, url.clone(), json!({"user": "root", "pass": "pw"}))).await;
    assert_eq!(status, 200, "{v2}");
    let m2 = v2["ModifyIndex"].as_u64().unwrap();
    assert!(m2 > m1);
    assert_eq!(v2["CreateIndex"], m1);
    assert_eq!(v2["CreateTime"], v1["CreateTime"]);
    let (status, index, conflict) = send(put(h, url, json!({"user": "late"}))).await;
    assert_eq!((status, index), (409, m2));
    assert_eq!(conflict["Items"], json!({"user": "root", "pass": "pw"}));
    let (status, _, read) = send(h.get(t.url("/v1/var/app/db"))).await;
    assert_eq!((status, &read), (200, &v2));
    // A cas index on a variable that does not exist: a conflict with only its path.
    let (status, index, none) =
        send(put(h, t.url("/v1/var/app/none?cas=5"), json!({"a": "b"}))).await;
    assert_eq!((status, index), (409, 0));
    assert_eq!(none["Path"], "app/none");
    assert_eq!(none["Items"], Value::Null);

    // Lists: metadata only, by path, under a prefix.
    for p in ["app/web", "other/x"] {
        let (status, _, _) = send(put(h, t.url(&format!("/v1/var/{p}")), json!({"k": "v"}))).await;
        assert_eq!(status, 200);
    }
    let (status, index, list) = send(h.get(t.url("/v1/vars?prefix=app/"))).await;
    assert_eq!(status, 200);
    assert!(index >= m2);
    let paths: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["Path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["app/db", "app/web"]);
    assert!(list[0].get("Items").is_none(), "{list}");
    assert_eq!(list[0]["ModifyIndex"], m2);
    let (_, _, all) = send(h.get(t.url("/v1/vars"))).await;
    assert_eq!(all.as_array().unwrap().len(), 3);

    // Deletes: a stale cas conflicts; the right one answers 204 with no body.
    let (status, _, conflict) = send(h.delete(t.url(&format!("/v1/var/app/db?cas={m1}")))).await;
    assert_eq!(status, 409);
    assert_eq!(conflict["ModifyIndex"], m2);
    let (status, index, body) = send(h.delete(t.url(&format!("/v1/var/app/db?cas={m2}")))).await;
    assert_eq!((status, body), (204, json!("")));
    assert!(index > m2);
    let (status, _, _) = send(h.get(t.url("/v1/var/app/db"))).await;
    assert_eq!(status, 404);
    let (status, _, _) = send(h.delete(t.url("/v1/var/app/db"))).await;
    assert_eq!(status, 204, "deleting what is not there is not an error");
}

#[tokio::test]
async fn bad_variables_are_400s_naming_the_problem() {
    let t = TestAgent::start("", vec![]).await;
    let h = &t.http;
    let long = "a".repeat(129);
    let cases: Vec<(String, Value, &str)> = vec![
        ("/v1/var/a".into(), json!({}), "missing required Items"),
        (
            "/v1/var/a".into(),
            json!({"Items": {}}),
            "missing required Items",
        ),
        (
            "/v1/var/a".into(),
            json!({"Items": {"n": 1}}),
            "expected a string",
        ),
        (
            "/v1/var/a.b".into(),
            json!({"Items": {"k": "v"}}),
            "'.' is not allowed",
        ),
        (
            format!("/v1/var/{long}"),
            json!({"Items": {"k": "v"}}),
            "longer than 128",
        ),
        (
            "/v1/var/a/".into(),
            json!({"Items": {"k": "v"}}),
            "must not start or end with \"/\"",
        ),
        (
            "/v1/var/nomad/other".into(),
            json!({"Items": {"k": "v"}}),
            "only paths at \"nomad/jobs\"",
        ),
        (
            "/v1/var/a".into(),
            json!({"Path": "b", "Items": {"k": "v"}}),
            "does not match the path in the URL",
        ),
        (
            "/v1/var/a?cas=x".into(),
            json!({"Items": {"k": "v"}}),
            "can not parse cas",
        ),
        (
            "/v1/var/a?namespace=*".into(),
            json!({"Items": {"k": "v"}}),
            "wildcard",
        ),
        (
            "/v1/var/a".into(),
            json!({"Namespace": "a/b", "Items": {"k": "v"}}),
            "invalid namespace",
        ),
        (
            "/v1/var/big".into(),
            json!({"Items": {"k": "x".repeat(64 << 10)}}),
            "64KiB",
        ),
        (
            "/v1/var/".into(),
            json!({"Items": {"k": "v"}}),
            "missing variable path",
        ),
    ];
    for (path, body, want) in cases {
        let (status, _, text) = send(h.put(t.url(&path)).json(&body)).await;
        assert_eq!(status, 400, "{path}: {text}");
        assert!(text.as_str().unwrap().contains(want), "{path}: {text}");
    }
    let (_, _, list) = send(h.get(t.url("/v1/vars?namespace=*"))).await;
    assert_eq!(list, json!([]), "nothing was written");
}

#[tokio::test]
async fn namespaces_keep_variables_apart() {
    let t = TestAgent::start("", vec![]).await;
    let h = &t.http;
    send(put(h, t.url("/v1/var/shared"), json!({"env": "dev"}))).await;
    send(put(
        h,
        t.url("/v1/var/shared?namespace=prod"),
        json!({"env": "prod"}),
    ))
    .await;
    // The body's namespace wins over the query's, as in Nomad.
    let (status, _, v) = send(
        h.put(t.url("/v1/var/only-qa?namespace=prod"))
            .json(&json!({"Namespace": "qa", "Items": {"k": "v"}})),
    )
    .await;
    assert_eq!((status, v["Namespace"].as_str()), (200, Some("qa")));
    let (_, _, dev) = send(h.get(t.url("/v1/var/shared"))).await;
    let (_, _, prod) = send(h.get(t.url("/v1/var/shared?namespace=prod"))).await;
    assert_eq!(
        (dev["Items"]["env"].as_str(), prod["Items"]["env"].as_str()),
        (Some("dev"), Some("prod"))
    );
    let (status, _, _) = send(h.get(t.url("/v1/var/only-qa"))).await;
    assert_eq!(status, 404);
    let ns_paths = |list: &Value| -> Vec<String> {
        list.as_array()
            .unwrap()
            .iter()
            .map(|m| {
                format!(
                    "{}:{}",
                    m["Namespace"].as_str().unwrap(),
                    m["Path"].as_str().unwrap()
                )
            })
            .collect()
    };
    let (_, _, default) = send(h.get(t.url("/v1/vars"))).await;
    assert_eq!(ns_paths(&default), ["default:shared"]);
    let (_, _, all) = send(h.get(t.url("/v1/vars?namespace=*"))).await;
    assert_eq!(
        ns_paths(&all),
        ["default:shared", "prod:shared", "qa:only-qa"]
    );
    // Deleting in one namespace leaves the other.
    let (status, _, _) = send(h.delete(t.url("/v1/var/shared?namespace=prod"))).await;
    assert_eq!(status, 204);
    let (status, _, _) = send(h.get(t.url("/v1/var/shared"))).await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variables_and_their_indexes_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = AgentProcess::new(dir.path());
    agent.start().await;
    let h = agent.http.clone();
    let (status, _, before) = send(put(&h, agent.url("/v1/var/kept/one"), json!({"a": "1"}))).await;
    assert_eq!(status, 200, "{before}");
    agent.interrupt();
    agent.start().await;
    let (status, _, after) = send(h.get(agent.url("/v1/var/kept/one"))).await;
    assert_eq!((status, &after), (200, &before));
    // The change index went on from where it was: a new write's index is newer, and the
    // old one still serves as the check-and-set index.
    let m = before["ModifyIndex"].as_u64().unwrap();
    let (status, _, next) = send(put(
        &h,
        agent.url(&format!("/v1/var/kept/one?cas={m}")),
        json!({"a": "2"}),
    ))
    .await;
    assert_eq!(status, 200, "{next}");
    assert!(next["ModifyIndex"].as_u64().unwrap() > m, "{next}");
}

/// A raw_exec task `t` of group `g` that prints `local/out.txt`, rendered from `tmpl`.
fn template_job(id: &str, tmpl: &str) -> Value {
    json!({ "ID": id, "Type": "batch", "TaskGroups": [{ "Name": "g", "RestartPolicy": { "Attempts": 0 },
        "Tasks": [{ "Name": "t", "Driver": "raw_exec",
            "Config": { "command": "/bin/cat", "args": ["local/out.txt"] },
            "Templates": [{ "EmbeddedTmpl": tmpl, "DestPath": "local/out.txt" }] }] }] })
}

/// The message of the task's "Setup Failure" event.
fn setup_error(alloc: &Value) -> String {
    let events = alloc["TaskStates"]["t"]["Events"].as_array().unwrap();
    let ev = events
        .iter()
        .find(|e| e["Type"] == "Setup Failure")
        .unwrap_or_else(|| panic!("{events:#?}"));
    ev["SetupError"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_template_reads_the_variables_of_its_job_group_and_task() {
    // Dev mode gives the built-in template hook the `variables` grant.
    let t = TestAgent::start("", vec![]).await;
    let h = &t.http;
    for (path, items) in [
        ("nomad/jobs", json!({"site": "paddock"})),
        (
            "nomad/jobs/vjob",
            json!({"user": "admin", "pass": "s3cret"}),
        ),
        (
            "nomad/jobs/vjob/g/t",
            json!({"greeting": "hi", "lang": "en"}),
        ),
        // Another job's, and the same job id's in another namespace: neither is seen.
        ("nomad/jobs/vjob2", json!({"user": "not this one"})),
        (
            "nomad/jobs/vjob/g?namespace=prod",
            json!({"x": "another namespace's"}),
        ),
    ] {
        let (status, _, v) = send(put(h, t.url(&format!("/v1/var/{path}")), items)).await;
        assert_eq!(status, 200, "{v}");
    }
    let tmpl = concat!(
        "{{ with nomadVar \"nomad/jobs/vjob\" }}user={{ .user }} pass={{ .pass }}{{ end }}\n",
        "{{ range $k, $v := nomadVar \"nomad/jobs/vjob/g/t\" }}{{ $k }}={{ $v }};{{ end }}\n",
        "{{ with nomadVar \"nomad/jobs/vjob/g\" }}{{ .x }}{{ else }}no group variable{{ end }}\n",
        "{{ range nomadVarList \"nomad/jobs\" }}{{ .Path }} {{ end }}\n",
        "{{ with nomadVar \"nomad/jobs\" }}{{ .site }}{{ end }}\n",
    );
    t.post_job(template_job("vjob", tmpl)).await;
    let (a, out) = stdout_of(&t, "vjob").await;
    assert_eq!(a["ClientStatus"], "complete", "{a:#}");
    assert_eq!(
        out,
        "user=admin pass=s3cret\ngreeting=hi;lang=en;\nno group variable\nnomad/jobs nomad/jobs/vjob nomad/jobs/vjob/g/t \npaddock\n"
    );
}

#[tokio::test]
async fn a_template_reading_a_variable_beyond_its_job_fails_the_task_naming_the_path() {
    let t = TestAgent::start("", vec![]).await;
    send(put(
        &t.http,
        t.url("/v1/var/nomad/jobs/other"),
        json!({"x": "secret"}),
    ))
    .await;
    t.post_job(template_job(
        "nosy",
        "{{ with nomadVar \"nomad/jobs/other\" }}{{ .x }}{{ end }}",
    ))
    .await;
    let (a, out) = stdout_of(&t, "nosy").await;
    assert_eq!(a["ClientStatus"], "failed", "{a:#}");
    assert_eq!(out, "", "the task must not have run");
    let msg = setup_error(&a);
    assert!(
        msg.contains("hook \"template\"")
            && msg.contains("nomadVar \"nomad/jobs/other\"")
            && msg.contains("Permission denied"),
        "{msg}"
    );

    // Without the grant, even the job's own variable is refused, and the message says so.
    let ungranted = TestAgent::start(
        "plugin \"template\" {\n grant {\n env = true\n task_dir = true\n }\n}",
        vec![],
    )
    .await;
    ungranted
        .post_job(template_job(
            "own",
            "{{ with nomadVar \"nomad/jobs/own\" }}{{ .x }}{{ end }}",
        ))
        .await;
    let (a, _) = stdout_of(&ungranted, "own").await;
    assert_eq!(a["ClientStatus"], "failed", "{a:#}");
    let msg = setup_error(&a);
    assert!(msg.contains("`variables` grant"), "{msg}");
}

#[tokio::test]
async fn a_dispatched_child_reads_its_parent_jobs_variables() {
    let t = TestAgent::start("", vec![]).await;
    send(put(
        &t.http,
        t.url("/v1/var/nomad/jobs/pjob"),
        json!({"mode": "parent's"}),
    ))
    .await;
    let mut job = template_job(
        "pjob",
        "mode={{ with nomadVar \"nomad/jobs/pjob\" }}{{ .mode }}{{ end }}\n",
    );
    job["ParameterizedJob"] = json!({ "Payload": "optional" });
    let r = t.post_job(job).await;
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    let (status, _, d) = send(t.http.post(t.url("/v1/job/pjob/dispatch")).json(&json!({}))).await;
    assert_eq!(status, 200, "{d}");
    let child = d["DispatchedJobID"].as_str().unwrap().to_string();
    assert!(child.starts_with("pjob/dispatch-"), "{child}");
    // A child's id holds a `/`: escaped in the URL.
    let (a, out) = stdout_of(&t, &child.replace('/', "%2F")).await;
    assert_eq!(a["ClientStatus"], "complete", "{a:#}");
    assert_eq!(out, "mode=parent's\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_and_deletes_are_variables_events() {
    let t = TestAgent::start("", vec![]).await;
    let r = t
        .http
        .get(t.url("/v1/event/stream?topic=Variables"))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let mut r = r;
    send(put(
        &t.http,
        t.url("/v1/var/ev/a"),
        json!({"secret": "never in events"}),
    ))
    .await;
    send(t.http.delete(t.url("/v1/var/ev/a"))).await;
    let mut buf = String::new();
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while events.len() < 2 {
        let chunk = tokio::time::timeout_at(deadline, r.chunk())
            .await
            .expect("events in time")
            .unwrap()
            .unwrap();
        buf.push_str(std::str::from_utf8(&chunk).unwrap());
        while let Some(nl) = buf.find('\n') {
            let line: Value = serde_json::from_str(&buf[..nl]).unwrap();
            buf.drain(..=nl);
            events.extend(line["Events"].as_array().cloned().unwrap_or_default());
        }
    }
    let types: Vec<&str> = events.iter().map(|e| e["Type"].as_str().unwrap()).collect();
    assert_eq!(types, ["VariableUpserted", "VariableDeleted"]);
    assert_eq!(events[0]["Topic"], "Variables");
    assert_eq!(events[0]["Key"], "ev/a");
    assert_eq!(events[0]["Payload"]["Variable"]["Path"], "ev/a");
    assert!(
        !events[0].to_string().contains("never in events"),
        "{}",
        events[0]
    );
}

#[tokio::test]
async fn template_functions_render_and_the_host_gives_the_file_its_perms() {
    use std::os::unix::fs::PermissionsExt;
    let t = TestAgent::start("", vec![]).await;
    let (status, _, v) = send(put(
        &t.http,
        t.url("/v1/var/nomad/jobs/fjob"),
        json!({"hosts": "a.internal,b.internal"}),
    ))
    .await;
    assert_eq!(status, 200, "{v}");
    let tmpl = concat!(
        "{{ with nomadVar \"nomad/jobs/fjob\" }}{{ range split \",\" .hosts }}{{ . | toUpper }};{{ end }}",
        "{{ toJSON . }}{{ end }}|{{ \"x.y\" | replaceAll \".\" \"_\" }}|",
        "{{ printf \"%s-%s\" (env \"NOMAD_TASK_NAME\") \"z\" }}|{{ timestamp \"2006\" | len_is_not_here }}"
    );
    // An unknown function fails the task, naming it.
    t.post_job(template_job("fbad", tmpl)).await;
    let (a, _) = stdout_of(&t, "fbad").await;
    assert_eq!(a["ClientStatus"], "failed");
    assert!(
        setup_error(&a).contains("unknown function \"len_is_not_here\""),
        "{a:#}"
    );
    let tmpl = tmpl.replace(" | len_is_not_here", "");
    let mut job = template_job("fjob", &tmpl);
    job["TaskGroups"][0]["Tasks"][0]["Templates"][0]["Perms"] = json!("0600");
    t.post_job(job).await;
    let (a, out) = stdout_of(&t, "fjob").await;
    assert_eq!(a["ClientStatus"], "complete", "{a:#}");
    let year = &out[out.len() - 4..];
    assert!(year.starts_with("20"), "{out}");
    assert_eq!(
        out,
        format!(
            "A.INTERNAL;B.INTERNAL;{}|x_y|t-z|{year}",
            r#"{"hosts":"a.internal,b.internal"}"#
        )
    );
    let id = a["ID"].as_str().unwrap();
    let file = t.agent.alloc_root().join(id).join("t/local/out.txt");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", file.display());
}
