//! Plugins in other languages (`examples/plugins/`), built from the repo's WIT by their own
//! toolchains: the `py-guard` hook (Python, componentize-py) and the `countdown` driver
//! (JavaScript, componentize-js). Both are built once per test run into `target/polyglot/`
//! by the examples' `build.sh`; where the tools are missing the build installs them first
//! (componentize-py from PyPI into `target/polyglot/py-deps`, `npm ci` in the JS folder),
//! as `.ci/run` does. Then `agent component check` passes them, and a real agent runs jobs
//! through them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use paddock::runtime::ComponentSource;
use serde_json::{Value, json};
use tokio::process::Command;
use tokio::sync::OnceCell;

use crate::harness::{TestAgent, all_terminal, event_types, last_terminated, stdout_of};

/// The built components, each alone in a components folder.
struct Built {
    py_hook: PathBuf,
    js_driver: PathBuf,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs a build step, failing the test with its output.
async fn run(what: &str, cmd: &mut Command) {
    let out = tokio::time::timeout(Duration::from_secs(600), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish in 10 minutes"))
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A Python with componentize-py importable, and the folder to put in `PYTHONPATH`.
pub async fn componentize_py() -> (String, PathBuf) {
    let folder = root().join("examples/plugins/python-hook");
    crate::harness::python_with(
        "componentize_py",
        &folder.join("requirements.txt"),
        "polyglot/py-deps",
    )
    .await
}

/// `node_modules` with componentize-js (the JS example's, `npm ci` there when missing).
pub async fn componentize_js() -> PathBuf {
    let folder = root().join("examples/plugins/js-driver");
    if !folder.join("node_modules/.bin/componentize-js").exists() {
        run(
            "npm ci in examples/plugins/js-driver",
            Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund"])
                .current_dir(&folder),
        )
        .await;
    }
    folder.join("node_modules")
}

async fn build_py(out: &Path) {
    let folder = root().join("examples/plugins/python-hook");
    let (python, deps) = componentize_py().await;
    run(
        "the Python hook's build.sh",
        Command::new(folder.join("build.sh"))
            .arg(out)
            .env("PYTHON", python)
            .env("PYTHONPATH", deps),
    )
    .await;
}

async fn build_js(out: &Path) {
    let folder = root().join("examples/plugins/js-driver");
    componentize_js().await;
    run(
        "the JS driver's build.sh",
        Command::new(folder.join("build.sh")).arg(out),
    )
    .await;
}

/// Builds both components, once per test run.
async fn built() -> &'static Built {
    static BUILT: OnceCell<Built> = OnceCell::const_new();
    BUILT
        .get_or_init(|| async {
            let base = root().join("target/polyglot/test");
            let py_hook = base.join("py/py-hook.wasm");
            let js_driver = base.join("js/js-driver.wasm");
            tokio::join!(build_py(&py_hook), build_js(&js_driver));
            // Compiled once into the tests' shared compile cache: the agents of the tests
            // below load them at the same time, and would each compile them.
            let rt = crate::harness::runtime(Default::default());
            for file in [&py_hook, &js_driver] {
                let bytes: Arc<[u8]> = Arc::from(std::fs::read(file).unwrap());
                rt.prepare(ComponentSource::File(file.clone()), bytes)
                    .await
                    .unwrap_or_else(|r| panic!("{r}"));
            }
            Built { py_hook, js_driver }
        })
        .await
}

fn folder_of(file: &Path) -> Vec<PathBuf> {
    vec![file.parent().unwrap().to_path_buf()]
}

/// `agent component check FILE ARGS…`: its exit code and report.
async fn check(file: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(crate::harness::agent_bin())
        .args(["component", "check"])
        .arg(file)
        .args(args)
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_hook_and_the_js_driver_pass_component_check() {
    let b = built().await;
    let ((py_code, py), (js_code, js)) = tokio::join!(
        check(&b.py_hook, &["--config", r#"{"max_memory_mb": 512}"#]),
        check(&b.js_driver, &["--task-config", r#"{"seconds": 30}"#]),
    );
    for (code, text) in [(py_code, &py), (js_code, &js)] {
        assert_eq!(code, Some(0), "{text}");
        assert!(!text.contains("FAIL"), "{text}");
        assert!(text.contains(" 0 failed"), "{text}");
    }
    for line in [
        "pass  load: hook component \"py-guard\"",
        "pass  prestart: 5 env vars",
        "pass  stop (again)",
    ] {
        assert!(py.contains(line), "{line}:\n{py}");
    }
    for line in [
        "pass  load: driver component \"countdown\"",
        "pass  validate-config (unknown field): refused, naming the field",
        "pass  recover (damaged handle)",
        "pass  destroy (running, not forced)",
        "pass  stop: exited after stop",
        "pass  signal: SIGHUP delivered",
        "pass  two tasks at once",
    ] {
        assert!(js.contains(line), "{line}:\n{js}");
    }
}

fn countdown_job(id: &str, kind: &str, config: Value) -> Value {
    json!({ "ID": id, "Type": kind, "TaskGroups": [{ "Name": "g",
        "RestartPolicy": { "Attempts": 0 }, "Tasks": [{ "Name": "t", "Driver": "countdown",
        "Config": config, "KillTimeout": 1_000_000_000u64 }] }] })
}

/// The countdown driver validates its config field by field, counts down on the host's
/// clock and exits with its code; a long one answers stats and signals, and a stop ends
/// it with the job's kill signal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_js_countdown_driver_validates_exits_with_its_code_and_stops_by_signal() {
    let b = built().await;
    let t = TestAgent::start("", folder_of(&b.js_driver)).await;

    let bad = json!({ "seconds": -1, "exit_code": 300, "colour": "red" });
    let (status, v) = t
        .post(
            "/v1/validate/job",
            json!({ "Job": countdown_job("bad", "batch", bad) }),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let errors = v["ValidationErrors"].to_string();
    for want in [
        "Tasks[0].Config.colour: unknown field",
        "Tasks[0].Config.seconds: must be a number from 0 to 86400",
        "Tasks[0].Config.exit_code: must be an integer from 0 to 255",
    ] {
        assert!(errors.contains(want), "{want}: {v}");
    }

    // One second, then exit code 3: the task fails with that code.
    let started = Instant::now();
    t.post_job(countdown_job(
        "three",
        "batch",
        json!({ "seconds": 1, "exit_code": 3 }),
    ))
    .await;
    let (alloc, out) = stdout_of(&t, "three").await;
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(alloc["ClientStatus"], "failed", "{alloc:#}");
    let end = last_terminated(&alloc, "t");
    assert_eq!(end["ExitCode"], 3, "{alloc:#}");
    assert_eq!(end["Signal"], 0, "{alloc:#}");
    assert_eq!(out, "countdown: 1s, then exit 3\n");

    // An hour: running, with stats; a SIGHUP is taken and logged; a stop ends it by SIGINT.
    t.post_job(countdown_job("hour", "service", json!({ "seconds": 3600 })))
        .await;
    let allocs = t
        .wait_allocs("hour", Duration::from_secs(30), |a| {
            a.iter().any(|a| {
                a["ClientStatus"] == "running" && a["TaskStates"]["t"]["State"] == "running"
            })
        })
        .await;
    let id = allocs[0]["ID"].as_str().unwrap().to_string();
    let stats = t.get(&format!("/v1/client/allocation/{id}/stats")).await;
    assert!(stats["Tasks"]["t"].is_object(), "{stats:#}");
    let (status, v) = t
        .post(
            &format!("/v1/client/allocation/{id}/signal"),
            json!({"Task": "t", "Signal": "SIGHUP"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = t.send(reqwest::Method::DELETE, "/v1/job/hour", None).await;
    assert_eq!(status, 200, "{v}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let alloc = loop {
        let alloc = t.get(&format!("/v1/allocation/{id}")).await;
        if alloc["TaskStates"]["t"]["State"] == "dead" {
            break alloc;
        }
        assert!(Instant::now() < deadline, "not stopped: {alloc:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        last_terminated(&alloc, "t")["Signal"],
        2,
        "SIGINT, Nomad's default kill_signal: {alloc:#}"
    );
    let log = t.agent.alloc_root().join(&id).join("alloc/logs/t.stdout.0");
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "countdown: 3600s, then exit 0\ncountdown: got SIGHUP\ncountdown: stopped with SIGINT\n"
    );
}

const PY_GUARD: &str = r#"
plugin "py-guard" {
  file = "py-hook.wasm"
  config {
    max_memory_mb = 512
    required_meta = ["owner"]
    heap_percent  = 50
  }
}
hook "py-guard" {
  drivers = ["raw_exec"]
}
"#;

/// A raw_exec job printing the `PADDOCK_PY_*` variables it was given.
fn env_job(id: &str, meta: Value, memory_mb: u64) -> Value {
    json!({ "ID": id, "Type": "batch", "Meta": meta, "TaskGroups": [{ "Name": "g",
        "RestartPolicy": { "Attempts": 0 }, "Tasks": [{ "Name": "t", "Driver": "raw_exec",
        "Resources": { "CPU": 300, "MemoryMB": memory_mb },
        "Config": { "command": "/bin/sh", "args": ["-c", "env | grep '^PADDOCK_PY_' | sort"] } }] }] })
}

/// The Python hook gives a task inside its policy env derived from its resources and meta,
/// keeps a start count in its state, and refuses tasks outside the policy with a Setup
/// Failure naming it and the reason, before anything starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_hook_sets_env_from_meta_and_resources_and_refuses_outside_its_policy() {
    let b = built().await;
    let t = TestAgent::start(PY_GUARD, folder_of(&b.py_hook)).await;
    t.post_job(env_job("fits", json!({ "owner": "team-a" }), 256))
        .await;
    t.post_job(env_job("big", json!({ "owner": "team-a" }), 1024))
        .await;
    t.post_job(env_job("anonymous", json!({}), 256)).await;

    let (a, out) = stdout_of(&t, "fits").await;
    assert_eq!(a["ClientStatus"], "complete", "{a:#}");
    assert_eq!(
        out,
        "PADDOCK_PY_CPU_MHZ=300\nPADDOCK_PY_HEAP_MB=128\nPADDOCK_PY_MEMORY_MB=256\n\
         PADDOCK_PY_META_OWNER=team-a\nPADDOCK_PY_START=1\nPADDOCK_PY_TASK=fits/g/t\n"
    );
    let local = t
        .agent
        .state()
        .local_state(a["ID"].as_str().unwrap(), "t")
        .unwrap()
        .unwrap();
    let (name, state) = &local.hooks[0];
    assert_eq!(name, "py-guard");
    assert_eq!(state.data.get("starts").map(String::as_str), Some("1"));

    for (job, reason) in [
        ("big", "memory 1024 MB is over the node's limit of 512 MB"),
        ("anonymous", "meta owner is required"),
    ] {
        let (a, out) = stdout_of(&t, job).await;
        assert_eq!(a["ClientStatus"], "failed", "{a:#}");
        assert_eq!(out, "", "{job} ran");
        let events = a["TaskStates"]["t"]["Events"].as_array().unwrap();
        let ev = events
            .iter()
            .find(|e| e["Type"] == "Setup Failure")
            .unwrap_or_else(|| panic!("{events:#?}"));
        let want = format!("hook \"py-guard\" refused the task: {reason}");
        assert!(
            ev["SetupError"].as_str().unwrap().contains(&want),
            "{want}: {ev:#}"
        );
        assert!(!event_types(&a, "t").contains(&"Started".to_string()));
    }
}

/// A slow guest holds up only its own task: while the Python hook's prestart takes six
/// seconds (its `delay_ms`, on the host's timer), mock tasks on the same agent start and
/// finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_python_hook_does_not_hold_up_other_tasks() {
    let b = built().await;
    let config = "plugin \"py-guard\" {\n file = \"py-hook.wasm\"\n config {\n delay_ms = 6000\n }\n}\n\
                  hook \"py-guard\" {\n drivers = [\"raw_exec\"]\n}\n";
    let t = TestAgent::start(config, folder_of(&b.py_hook)).await;
    let started = Instant::now();
    t.post_job(env_job("slow", json!({}), 64)).await;
    // The hooked task is in its prestart before the others arrive.
    t.wait_allocs("slow", Duration::from_secs(10), |a| {
        a.iter()
            .any(|a| event_types(a, "t").iter().any(|e| e == "Task Setup"))
    })
    .await;
    let mocks = ["m1", "m2", "m3"];
    for id in mocks {
        t.post_job(crate::harness::mock_job(id, json!({"run_for": "10ms"})))
            .await;
    }
    for id in mocks {
        let allocs = t
            .wait_allocs(id, Duration::from_secs(20), all_terminal)
            .await;
        assert_eq!(allocs[0]["ClientStatus"], "complete", "{:#}", allocs[0]);
    }
    let others_done = started.elapsed();
    let slow = t.get("/v1/job/slow/allocations").await;
    assert!(
        !event_types(&slow[0], "t").contains(&"Started".to_string()),
        "the hooked task started before the others finished ({others_done:?}): {slow:#}"
    );

    let (a, out) = stdout_of(&t, "slow").await;
    assert_eq!(a["ClientStatus"], "complete", "{a:#}");
    assert!(started.elapsed() >= Duration::from_secs(6));
    assert!(out.contains("PADDOCK_PY_TASK=slow/g/t\n"), "{out}");
}
