//! `agent component new`: every project it writes builds where it was written, with no
//! Paddock checkout and offline, passes its own tests, and is a component the agent accepts
//! (`component validate`) and that keeps the contract (`component check`), with no edits.

use std::path::Path;
use std::process::{Command, Output};

use crate::harness::{agent_bin, cargo, repo_root};

fn agent(dir: &Path, args: &[&str]) -> Output {
    Command::new(agent_bin())
        .current_dir(dir)
        .args(args)
        .output()
        .expect("running the agent binary")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `cmd` in `dir` with the projects' shared target and build dirs; panics with its
/// output on failure.
fn run_ok(mut cmd: Command, dir: &Path, target: &Path, what: &str) -> String {
    let out = cmd
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .env("CARGO_BUILD_BUILD_DIR", crate::harness::shared_build_dir())
        .output()
        .unwrap();
    let all = text(&out);
    assert!(
        out.status.success(),
        "{what} failed in {}:\n{all}",
        dir.display()
    );
    all
}

#[test]
fn rust_projects_of_every_world_build_offline_test_and_pass_check() {
    // Under target/ (not /tmp) so the shared target dir's builds are kept between runs.
    let base = repo_root().join("target/component-new");
    let _ = std::fs::remove_dir_all(base.join("projects"));
    let projects = base.join("projects");
    std::fs::create_dir_all(&projects).unwrap();
    let target = base.join("target");
    for (world, name) in [
        ("driver", "new-driver"),
        ("hook", "new-hook"),
        ("device-plugin", "new-device"),
        ("check", "new-check"),
        ("secret-provider", "new-secrets"),
    ] {
        let out = agent(
            &projects,
            &["component", "new", "--world", world, "--lang", "rust", name],
        );
        assert!(out.status.success(), "{}", text(&out));
        let dir = projects.join(name);
        for file in ["Cargo.toml", "Cargo.lock", "README.md", "src/lib.rs"] {
            assert!(dir.join(file).is_file(), "{name}: no {file}");
        }
        let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
        assert!(
            readme.lines().count() <= 25,
            "{name}'s README is more than a screen"
        );
        let lock = std::fs::read_to_string(dir.join("Cargo.lock")).unwrap();

        let mut build = cargo();
        build.args([
            "build",
            "--offline",
            "--release",
            "--target",
            "wasm32-wasip2",
        ]);
        // The template's release profile keeps its size (`opt-level = "s"`); its whole-
        // program LTO and single codegen unit, which only shrink the file further, are left
        // to the author's own builds: five LTO links are a minute of the suite.
        build
            .env("CARGO_PROFILE_RELEASE_LTO", "false")
            .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16");
        run_ok(build, &dir, &target, &format!("building {name}"));
        // The lock was complete: cargo had nothing to resolve or rewrite.
        assert_eq!(
            std::fs::read_to_string(dir.join("Cargo.lock")).unwrap(),
            lock
        );
        let mut test = cargo();
        test.args(["test", "--offline"]);
        let tests = run_ok(test, &dir, &target, &format!("testing {name}"));
        assert!(tests.contains("test result: ok."), "{tests}");
        assert!(!tests.contains("0 passed"), "{name} has no tests:\n{tests}");

        let wasm = target.join(format!(
            "wasm32-wasip2/release/{}.wasm",
            name.replace('-', "_")
        ));
        // The SDK's `declare_grants!` survives the toolchain into the component.
        let declared = paddock::runtime::inspect::inspect(&std::fs::read(&wasm).unwrap())
            .unwrap()
            .declared_grants;
        assert!(declared.is_some(), "{name} declares no grants");
        if world == "secret-provider" {
            assert!(declared.unwrap().variables, "{name}");
        }
        let wasm = wasm.to_str().unwrap();
        let out = agent(&dir, &["component", "validate", wasm]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(
            text(&out).contains(&format!("{world} component \"{name}\"")),
            "{}",
            text(&out)
        );
        // A check reaches the test listener on loopback only with the grant.
        let out = if world == "check" {
            agent(
                &dir,
                &["component", "check", wasm, "--network", "127.0.0.1:*"],
            )
        } else {
            agent(&dir, &["component", "check", wasm])
        };
        let report = text(&out);
        assert!(out.status.success(), "{name} fails its check:\n{report}");
        assert!(
            !report.contains("FAIL") && !report.contains("warn "),
            "{report}"
        );
    }
}

#[test]
fn a_taken_folder_or_a_bad_name_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("taken")).unwrap();
    let out = agent(
        dir.path(),
        &["component", "new", "--world", "hook", "taken"],
    );
    assert!(!out.status.success());
    assert!(text(&out).contains("already exists"), "{}", text(&out));
    for bad in ["Upper", "1st", "a b", "../escape"] {
        let out = agent(dir.path(), &["component", "new", "--world", "driver", bad]);
        assert!(!out.status.success(), "{bad} accepted");
        assert!(
            text(&out).contains("is not a plugin name"),
            "{}",
            text(&out)
        );
    }
    let out = agent(dir.path(), &["component", "new", "--world", "plugin", "x"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("driver, hook, device-plugin, check"),
        "{}",
        text(&out)
    );
    let out = agent(
        dir.path(),
        &[
            "component",
            "new",
            "--world",
            "check",
            "--lang",
            "python",
            "x",
        ],
    );
    assert!(!out.status.success());
    assert!(text(&out).contains("Rust only"), "{}", text(&out));
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, ["taken"], "something was left behind");
    assert_eq!(
        std::fs::read_dir(dir.path().join("taken")).unwrap().count(),
        0
    );
}

/// Python and JavaScript projects of every world build with their own tools (installed as
/// the polyglot examples' are) and pass their own `test.sh`: `agent component check`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_and_js_projects_of_every_world_build_and_pass_check() {
    let (python, deps) = crate::polyglot::componentize_py().await;
    let node_modules = crate::polyglot::componentize_js().await;
    let projects = repo_root().join("target/component-new/other");
    let _ = std::fs::remove_dir_all(&projects);
    std::fs::create_dir_all(&projects).unwrap();
    // `test.sh` runs `agent`: the one under test, first on PATH.
    let path = crate::harness::path_with_agent(&projects);
    for lang in ["python", "js"] {
        for world in ["driver", "hook", "device-plugin"] {
            let name = format!("{lang}-{world}");
            let out = agent(
                &projects,
                &["component", "new", "--world", world, "--lang", lang, &name],
            );
            assert!(out.status.success(), "{}", text(&out));
            let dir = projects.join(&name);
            for file in ["README.md", "build.sh", "test.sh", "wit/plugins.wit"] {
                assert!(dir.join(file).is_file(), "{name}: no {file}");
            }
            if lang == "js" {
                // The example's packages, instead of `npm install` fetching them again.
                std::os::unix::fs::symlink(&node_modules, dir.join("node_modules")).unwrap();
            }
            // A Python hook and a JS driver run the whole contract in `polyglot::` (the
            // examples); theirs are built here and read for their world and contract, without
            // a second 10 s compile of an interpreter-sized component.
            // The project's own scripts, with the tools the test found.
            let script = |file: &str| {
                Command::new(dir.join(file))
                    .env("PATH", &path)
                    .env("PYTHON", &python)
                    .env("PYTHONPATH", &deps)
                    .output()
                    .unwrap()
            };
            if (lang, world) == ("python", "hook") || (lang, world) == ("js", "driver") {
                let out = script("build.sh");
                assert!(
                    out.status.success(),
                    "{name}'s build.sh failed:\n{}",
                    text(&out)
                );
                let wasm = dir.join(format!("target/{}.wasm", name.replace('-', "_")));
                let found = paddock::runtime::inspect::inspect(&std::fs::read(&wasm).unwrap())
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(found.world.as_str(), world, "{name}");
                assert_eq!(
                    found.version,
                    paddock::runtime::contract::SERVED[0],
                    "{name}"
                );
                continue;
            }
            let out = script("test.sh");
            let report = text(&out);
            assert!(out.status.success(), "{name}'s test.sh failed:\n{report}");
            assert!(
                report.contains(" 0 failed") && !report.contains("warn "),
                "{name}:\n{report}"
            );
            // The check's first line is the load `component validate` does.
            // Built against the newest contract this agent serves.
            let newest = paddock::runtime::contract::SERVED[0];
            let load = format!("pass  load: {world} component \"{name}\", contract {newest}");
            assert!(report.contains(&load), "{name}:\n{report}");
        }
    }
}
