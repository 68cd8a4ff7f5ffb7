//! `secret` blocks through the built-in `nomad` secret provider (a WebAssembly component
//! reading Nomad Variables on the task's behalf), against a real agent process: the secret
//! reaches the task's env through `${secret.NAME.KEY}` and its templates through `{{ env
//! "secret.NAME.KEY" }}`, and is not in its events, the API or the agent's log.

use serde_json::{Value, json};

use crate::harness::{AgentProcess, all_terminal};

const SECRET: &str = "s3cr3t-Zq9-paddock";

fn job(id: &str, env: Value, command: &str, args: &[&str]) -> Value {
    json!({ "ID": id, "Type": "batch", "TaskGroups": [{ "Name": "g",
        "RestartPolicy": { "Attempts": 0, "Mode": "fail" },
        "ReschedulePolicy": { "Attempts": 0, "Unlimited": false },
        "Tasks": [{ "Name": "t", "Driver": "raw_exec", "Env": env,
            "Secrets": [{ "Name": "db", "Provider": "nomad", "Path": "nomad/jobs/shared" }],
            "Config": { "command": command, "args": args },
            "Resources": { "CPU": 20, "MemoryMB": 32 } }] }] })
}

async fn finished(a: &AgentProcess, id: &str) -> Value {
    let allocs = a.wait_allocs(id, all_terminal).await;
    a.alloc(allocs[0]["ID"].as_str().unwrap()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_reaches_the_task_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = AgentProcess::new(dir.path());
    a.start().await;
    // Readable by both jobs: `nomad/jobs` is every job's.
    let r = a
        .http
        .put(a.url("/v1/var/nomad/jobs"))
        .json(&json!({ "Items": { "unrelated": "x" } }))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    // Only jobs named `shared` may read `nomad/jobs/shared`: the tests' jobs are named so.
    let r = a
        .http
        .put(a.url("/v1/var/nomad/jobs/shared"))
        .json(&json!({ "Items": { "password": SECRET } }))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());

    // The task's env names the secret; the task says whether it got it (by its digest, so
    // that the job itself does not hold it), not what it is.
    let digest = {
        let out = std::process::Command::new("sh")
            .args(["-c", &format!("printf %s '{SECRET}' | sha256sum")])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()[..64].to_string()
    };
    // A template reads it too (`{{ env "secret.db.password" }}`), into the secrets dir.
    let check = format!(
        "test \"$(printf %s \"$DB_PASS\" | sha256sum | cut -c1-64)\" = {digest} && echo match || echo mismatch; \
         test \"$(sha256sum < secrets/pw | cut -c1-64)\" = {digest} && echo template-match || echo template-mismatch"
    );
    let mut first = job(
        "shared",
        json!({ "DB_PASS": "${secret.db.password}" }),
        "/bin/sh",
        &["-c", &check],
    );
    first["TaskGroups"][0]["Tasks"][0]["Templates"] = json!([{
        "EmbeddedTmpl": "{{ env \"secret.db.password\" }}", "DestPath": "secrets/pw" }]);
    a.post_job(first).await;
    let ok = finished(&a, "shared").await;
    let id = ok["ID"].as_str().unwrap().to_string();
    assert_eq!(
        a.stdout(&id, "t").await,
        "match\ntemplate-match\n",
        "{ok:#}"
    );

    // A command line holding the secret that fails to start: the event shows `<redacted>`.
    a.post_job(job(
        "shared",
        json!({}),
        "/nonexistent/${secret.db.password}",
        &[],
    ))
    .await;
    let allocs = a
        .wait_allocs("shared", |al| al.len() == 2 && all_terminal(al))
        .await;
    let failed_id = allocs
        .iter()
        .map(|x| x["ID"].as_str().unwrap().to_string())
        .find(|x| *x != id)
        .unwrap();
    let failed = a.alloc(&failed_id).await;
    let events = failed["TaskStates"]["t"]["Events"].to_string();
    assert!(events.contains("<redacted>"), "{events}");

    // Not in the events, the allocations, the job, the agent's log.
    for path in [
        format!("/v1/allocation/{id}"),
        format!("/v1/allocation/{failed_id}"),
        "/v1/job/shared".to_string(),
        "/v1/job/shared/allocations".to_string(),
        format!("/v1/client/allocation/{id}/stats"),
    ] {
        let body = a
            .http
            .get(a.url(&path))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(!body.contains(SECRET), "{path} shows the secret: {body}");
    }
    assert!(
        !a.log().contains(SECRET),
        "the agent's log shows the secret"
    );

    // A provider that is not loaded: refused at registration, naming the field.
    let mut vault = job("shared", json!({}), "/bin/true", &[]);
    vault["TaskGroups"][0]["Tasks"][0]["Secrets"][0]["Provider"] = json!("vault");
    let r = a
        .http
        .post(a.url("/v1/jobs"))
        .json(&json!({ "Job": vault }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let text = r.text().await.unwrap();
    assert!(
        text.contains("Job.TaskGroups[0].Tasks[0].Secrets[0].Provider") && text.contains("nomad"),
        "{text}"
    );
}
