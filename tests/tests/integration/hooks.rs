//! WASM hooks attached to tasks: env from a hook reaches the task; a hook that fails its
//! task does so with a "Setup Failure" naming it.

use serde_json::json;

use crate::harness::{TestAgent, fixture_env_dir, stdout_of};

fn echo_job(id: &str, meta: serde_json::Value) -> serde_json::Value {
    json!({ "ID": id, "Type": "batch", "Meta": meta, "TaskGroups": [{ "Name": "g", "RestartPolicy": { "Attempts": 0 },
        "Tasks": [{ "Name": "t", "Driver": "raw_exec", "Env": { "GREETING": "from the job" },
            "Config": { "command": "/bin/sh", "args": ["-c", "echo \"$GREETING\""] } }] }] })
}

const ENV_HOOK: &str = r#"
plugin "env-inject" {
  grant {
    env = true
  }
  config {
    env = {
      GREETING = "hello ${NOMAD_TASK_NAME} of ${NOMAD_JOB_ID}"
    }
  }
}
"#;

#[tokio::test]
async fn a_hook_attached_to_all_tasks_sets_their_env_over_the_task_env() {
    let t = TestAgent::start(
        &format!("{ENV_HOOK}\nhook \"env-inject\" {{\n all_tasks = true\n}}"),
        vec![],
    )
    .await;
    t.post_job(echo_job("hooked", json!({}))).await;
    let (a, out) = stdout_of(&t, "hooked").await;
    assert_eq!(a["ClientStatus"], "complete", "{a:#}");
    assert_eq!(out, "hello t of hooked\n");
    // The hook's state was persisted with the task's local state.
    let local = t
        .agent
        .state()
        .local_state(a["ID"].as_str().unwrap(), "t")
        .unwrap()
        .unwrap();
    assert_eq!(local.hooks.len(), 1);
    assert_eq!(local.hooks[0].0, "env-inject");
    assert_eq!(
        local.hooks[0].1.data.get("applied").map(String::as_str),
        Some("GREETING")
    );
}

#[tokio::test]
async fn a_job_can_ask_for_a_hook_in_its_meta() {
    let t = TestAgent::start(ENV_HOOK, vec![]).await;
    t.post_job(echo_job("plain", json!({}))).await;
    t.post_job(echo_job("asks", json!({ "paddock.hooks": "env-inject" })))
        .await;
    assert_eq!(stdout_of(&t, "plain").await.1, "from the job\n");
    assert_eq!(stdout_of(&t, "asks").await.1, "hello t of asks\n");
}

#[tokio::test]
async fn a_failing_hook_fails_its_task_with_a_setup_failure_naming_it() {
    let t = TestAgent::start(
        "plugin \"env-inject\" {\n config {\n env = { A = 1 }\n }\n}\nhook \"env-inject\" {\n drivers = [\"raw_exec\"]\n}\nhook \"not-loaded\" {\n drivers = [\"mock\"]\n}",
        vec![],
    )
    .await;
    t.post_job(echo_job("refused", json!({}))).await;
    t.post_job(crate::harness::mock_job(
        "missing",
        json!({"run_for": "10ms"}),
    ))
    .await;
    for (job, task, want) in [
        (
            "refused",
            "t",
            "hook \"env-inject\" has an invalid config: env.A",
        ),
        ("missing", "t", "hook \"not-loaded\" is not loaded"),
    ] {
        let (a, _) = stdout_of(&t, job).await;
        assert_eq!(a["ClientStatus"], "failed", "{a:#}");
        let events = a["TaskStates"][task]["Events"].as_array().unwrap();
        let ev = events
            .iter()
            .find(|e| e["Type"] == "Setup Failure")
            .unwrap_or_else(|| panic!("{events:#?}"));
        assert!(ev["SetupError"].as_str().unwrap().contains(want), "{ev:#}");
        assert!(!events.iter().any(|e| e["Type"] == "Started"));
    }
}

#[tokio::test]
async fn the_policy_hook_refuses_tasks_outside_the_policy_with_a_clear_event() {
    let t = TestAgent::start(
        r#"
plugin "policy" {
  config {
    allowed_commands = ["/bin/echo", "/usr/bin/echo"]
    max_memory_mb    = 512
  }
}
hook "policy" {
  drivers = ["raw_exec", "mock"]
}
"#,
        vec![],
    )
    .await;
    let raw = |id: &str, command: &str| {
        json!({ "ID": id, "Type": "batch", "TaskGroups": [{ "Name": "g", "RestartPolicy": { "Attempts": 0 },
            "Tasks": [{ "Name": "t", "Driver": "raw_exec", "Config": { "command": command, "args": ["ok"] } }] }] })
    };
    t.post_job(raw("shell", "/bin/sh")).await;
    t.post_job(raw("echo", "/bin/echo")).await;
    let mut big = crate::harness::mock_job("big", json!({"run_for": "10ms"}));
    big["TaskGroups"][0]["Tasks"][0]["Resources"] = json!({"MemoryMB": 1024});
    t.post_job(big).await;
    for (job, want) in [
        ("shell", "command \"/bin/sh\" is not allowed"),
        ("big", "memory 1024 MB is above the limit of 512 MB"),
    ] {
        let (a, _) = stdout_of(&t, job).await;
        assert_eq!(a["ClientStatus"], "failed", "{a:#}");
        let events = a["TaskStates"]["t"]["Events"].as_array().unwrap();
        let ev = events
            .iter()
            .find(|e| e["Type"] == "Setup Failure")
            .unwrap_or_else(|| panic!("{events:#?}"));
        let msg = ev["SetupError"].as_str().unwrap();
        assert!(
            msg.contains("hook \"policy\" refused the task") && msg.contains(want),
            "{msg}"
        );
    }
    let (a, out) = stdout_of(&t, "echo").await;
    assert_eq!(a["ClientStatus"], "complete", "{a:#}");
    assert_eq!(out, "ok\n");
}

/// A raw_exec task that prints `local/app.conf` and `$GREETING`, with two templates: a
/// file in `local/` and an env file in `secrets/`.
fn template_job(id: &str, dest: &str) -> serde_json::Value {
    json!({ "ID": id, "Type": "batch", "TaskGroups": [{ "Name": "g", "RestartPolicy": { "Attempts": 0 },
        "Tasks": [{ "Name": "t", "Driver": "raw_exec", "Env": { "GREETING": "from the job" },
            "Config": { "command": "/bin/sh", "args": ["-c", "cat local/app.conf; echo \"$GREETING\""] },
            "Templates": [
                { "EmbeddedTmpl": "task={{ env \"NOMAD_TASK_NAME\" }} job={{- env \"NOMAD_JOB_ID\" }}\n", "DestPath": dest },
                { "EmbeddedTmpl": "# rendered\nGREETING=\"from the template of {{ env \"NOMAD_JOB_ID\" }}\"\n",
                  "DestPath": "secrets/app.env", "Envvars": true }
            ] }] }] })
}

const TEMPLATE_GRANT: &str = r#"
plugin "template" {
  grant {
    env      = true
    task_dir = true
  }
}
"#;

#[tokio::test]
async fn templates_render_into_the_task_dir_and_env_templates_set_the_task_env() {
    let t = TestAgent::start(TEMPLATE_GRANT, vec![]).await;
    t.post_job(template_job("tpl", "local/app.conf")).await;
    let (a, out) = stdout_of(&t, "tpl").await;
    assert_eq!(a["ClientStatus"], "complete", "{a:#}");
    assert_eq!(out, "task=t job=tpl\nfrom the template of tpl\n");
    let task_dir = t
        .agent
        .data_dir()
        .join("alloc")
        .join(a["ID"].as_str().unwrap())
        .join("t");
    assert_eq!(
        std::fs::read_to_string(task_dir.join("secrets/app.env")).unwrap(),
        "# rendered\nGREETING=\"from the template of tpl\"\n"
    );
    // Nothing but the rendered files: no temporary left behind.
    let mut local: Vec<String> = std::fs::read_dir(task_dir.join("local"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    local.sort();
    assert_eq!(local, ["app.conf"]);
}

#[tokio::test]
async fn a_template_escaping_the_task_dir_or_without_its_grant_fails_the_task() {
    let granted = TestAgent::start(TEMPLATE_GRANT, vec![]).await;
    granted
        .post_job(template_job("escape", "../../../../etc/x"))
        .await;
    granted
        .post_job(template_job("abs", "/etc/paddock-x"))
        .await;
    // An explicit block replaces dev mode's grants: env, but not the task dir.
    let ungranted = TestAgent::start(
        "plugin \"template\" {\n grant {\n env = true\n }\n}",
        vec![],
    )
    .await;
    ungranted
        .post_job(template_job("nogrant", "local/app.conf"))
        .await;
    for (t, job, want) in [
        (&granted, "escape", "climbs out"),
        (&granted, "abs", "outside the task dir"),
        (&ungranted, "nogrant", "grant { task_dir = true }"),
    ] {
        let (a, out) = stdout_of(t, job).await;
        assert_eq!(a["ClientStatus"], "failed", "{a:#}");
        assert_eq!(out, "", "the task must not have run");
        let events = a["TaskStates"]["t"]["Events"].as_array().unwrap();
        let ev = events
            .iter()
            .find(|e| e["Type"] == "Setup Failure")
            .unwrap_or_else(|| panic!("{events:#?}"));
        let msg = ev["SetupError"].as_str().unwrap();
        assert!(
            msg.contains("hook \"template\"") && msg.contains(want),
            "{msg}"
        );
    }
    assert!(!std::path::Path::new("/etc/paddock-x").exists());
}

#[tokio::test]
async fn template_env_overrides_every_other_hook_whatever_their_order() {
    for (env_inject_order, template_order) in [(1, 2), (2, 1)] {
        let config = format!(
            "{ENV_HOOK}\n{TEMPLATE_GRANT}\nhook \"env-inject\" {{\n order = {env_inject_order}\n all_tasks = true\n}}\nhook \"template\" {{\n order = {template_order}\n all_tasks = true\n}}"
        );
        let t = TestAgent::start(&config, vec![]).await;
        t.post_job(template_job("tplwins", "local/app.conf")).await;
        let (a, out) = stdout_of(&t, "tplwins").await;
        assert_eq!(a["ClientStatus"], "complete", "{a:#}");
        assert_eq!(out, "task=t job=tplwins\nfrom the template of tplwins\n");
        // Both hooks ran, in their configured order.
        let local = t
            .agent
            .state()
            .local_state(a["ID"].as_str().unwrap(), "t")
            .unwrap()
            .unwrap();
        let order: Vec<&str> = local.hooks.iter().map(|(n, _)| n.as_str()).collect();
        if env_inject_order < template_order {
            assert_eq!(order, ["env-inject", "template"]);
        } else {
            assert_eq!(order, ["template", "env-inject"]);
        }
    }
}

#[tokio::test]
async fn two_hooks_setting_one_env_key_the_last_in_first_run_order_wins_on_every_start() {
    let hooks = fixture_env_dir();
    for (env_inject_order, fixture_order, want) in
        [(1, 2, "from the fixture"), (2, 1, "hello t of lww")]
    {
        let config = format!(
            "{ENV_HOOK}\nplugin \"fixture-env\" {{\n config {{\n env = {{ GREETING = \"from the fixture\" }}\n done = true\n }}\n}}\nhook \"env-inject\" {{\n order = {env_inject_order}\n all_tasks = true\n}}\nhook \"fixture-env\" {{\n order = {fixture_order}\n all_tasks = true\n}}"
        );
        let t = TestAgent::start(&config, vec![hooks.path().to_path_buf()]).await;
        // The task fails once and is restarted once: two starts.
        t.post_job(json!({ "ID": "lww", "Type": "batch", "TaskGroups": [{ "Name": "g",
            "RestartPolicy": { "Attempts": 1, "Interval": 600_000_000_000u64, "Delay": 10_000_000, "Mode": "fail" },
            "Tasks": [{ "Name": "t", "Driver": "raw_exec",
                "Config": { "command": "/bin/sh", "args": ["-c", "echo \"$GREETING\"; exit 1"] } }] }] }))
            .await;
        let (a, out) = stdout_of(&t, "lww").await;
        assert_eq!(a["TaskStates"]["t"]["Restarts"], 1, "{a:#}");
        assert_eq!(
            out,
            format!("{want}\n{want}\n"),
            "order {env_inject_order}/{fixture_order}"
        );
        let local = t
            .agent
            .state()
            .local_state(a["ID"].as_str().unwrap(), "t")
            .unwrap()
            .unwrap();
        let fixture = &local
            .hooks
            .iter()
            .find(|(n, _)| n == "fixture-env")
            .unwrap()
            .1;
        // Done after its first run: skipped on the restart, its env applied all the same.
        assert!(fixture.prestart_done);
        assert_eq!(fixture.data.get("runs").map(String::as_str), Some("1"));
        let inject = &local
            .hooks
            .iter()
            .find(|(n, _)| n == "env-inject")
            .unwrap()
            .1;
        assert!(!inject.prestart_done);
    }
}
