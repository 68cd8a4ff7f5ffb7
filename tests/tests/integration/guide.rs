//! The plugin author's guide, `docs/plugins.md`, cannot rot: every code block in it says how
//! it is checked with a `<!-- test: … -->` line just before it, and a block without one
//! fails. `file P`: the block is the whole of `P`; `excerpt P`: it appears in `P` as it is
//! (both for sources the guest build or `component new`'s test compiles); `agent-config`:
//! the agent's config parser takes it; `run`: its commands are run by a test, as a reader
//! would, with `agent` on `PATH` and a registry on loopback at `$REGISTRY`; `contract-table`: the table is the driver contract's table
//! in the WIT docs, row for row.

use std::process::Command;

use paddock::config::AgentConfig;

use crate::harness::repo_root;

/// A code block or table of the guide and how it is tested.
struct Block {
    test: String,
    text: String,
    line: usize,
}

fn guide() -> String {
    std::fs::read_to_string(repo_root().join("docs/plugins.md")).unwrap()
}

/// Every fenced block and every marked table, with the marker before it (empty if none).
fn blocks(md: &str) -> Vec<Block> {
    let lines: Vec<&str> = md.lines().collect();
    let marker = |i: usize| -> String {
        (0..i)
            .rev()
            .map(|j| lines[j].trim())
            .find(|l| !l.is_empty())
            .and_then(|l| l.strip_prefix("<!-- test: "))
            .and_then(|l| l.strip_suffix(" -->"))
            .unwrap_or("")
            .to_string()
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let is_fence = lines[i].starts_with("```");
        let is_table = lines[i].starts_with('|') && (i == 0 || !lines[i - 1].starts_with('|'));
        if !is_fence && !is_table {
            i += 1;
            continue;
        }
        let start = i;
        let mut text = String::new();
        if is_fence {
            i += 1;
            while i < lines.len() && !lines[i].starts_with("```") {
                text.push_str(lines[i]);
                text.push('\n');
                i += 1;
            }
        } else {
            while i < lines.len() && lines[i].starts_with('|') {
                text.push_str(lines[i]);
                text.push('\n');
                i += 1;
            }
        }
        i += 1;
        let test = marker(start);
        // Tables are prose unless marked; code blocks must all be marked.
        if is_fence || !test.is_empty() {
            out.push(Block {
                test,
                text,
                line: start + 1,
            });
        }
    }
    out
}

/// A source that a build in the tests compiles: the guest workspace, or a template that
/// `component_new::` builds (Rust, Python and JavaScript).
fn compiled(path: &str) -> bool {
    [
        "guest-drivers/",
        "hooks-wasm/",
        "host/src/cli/component_new/templates/rust_",
        "host/src/cli/component_new/templates/py_",
        "host/src/cli/component_new/templates/js_",
    ]
    .iter()
    .any(|p| path.starts_with(p))
        && !path.contains("..")
}

/// Whether `block` is in `source` as it is, or indented as a whole (an item quoted out of
/// its module).
fn excerpt_of(block: &str, source: &str) -> bool {
    [0, 4, 8].iter().any(|&n| {
        let pad = " ".repeat(n);
        let indented: String = block
            .lines()
            .map(|l| {
                if l.is_empty() {
                    "\n".to_string()
                } else {
                    format!("{pad}{l}\n")
                }
            })
            .collect();
        source.contains(&indented)
    })
}

#[test]
fn every_block_of_the_guide_is_marked_and_holds() {
    let md = guide();
    let blocks = blocks(&md);
    let mut seen = std::collections::BTreeSet::new();
    for b in &blocks {
        let at = format!("docs/plugins.md:{}", b.line);
        let (kind, arg) = b.test.split_once(' ').unwrap_or((b.test.as_str(), ""));
        seen.insert(kind.to_string());
        match kind {
            "file" | "excerpt" => {
                assert!(
                    compiled(arg),
                    "{at}: {arg} is not a source the tests compile"
                );
                let source = std::fs::read_to_string(repo_root().join(arg))
                    .unwrap_or_else(|e| panic!("{at}: {arg}: {e}"));
                if kind == "file" {
                    assert_eq!(b.text, source, "{at}: the block is not {arg} as it is");
                } else {
                    assert!(
                        excerpt_of(&b.text, &source),
                        "{at}: the block is not in {arg}"
                    );
                }
            }
            "agent-config" => {
                let config = AgentConfig::parse(&b.text, &at).unwrap_or_else(|e| panic!("{e}"));
                config
                    .component_settings(&at)
                    .unwrap_or_else(|e| panic!("{e}"));
                assert!(!config.plugin.is_empty(), "{at}: no plugin block");
            }
            "contract-table" => {
                let wit =
                    std::fs::read_to_string(crate::harness::contract_dir().join("plugins.wit"))
                        .unwrap();
                let rows: String = wit
                    .lines()
                    .filter_map(|l| l.strip_prefix("/// |"))
                    .map(|l| format!("|{l}\n"))
                    .collect();
                assert_eq!(
                    b.text, rows,
                    "{at}: the table differs from the contract's plugins.wit"
                );
            }
            "run" => {} // the_guides_commands_run_as_written
            "" => panic!("{at}: a code block without a `<!-- test: … -->` line"),
            other => panic!("{at}: unknown test {other:?}"),
        }
    }
    for kind in ["file", "excerpt", "agent-config", "contract-table", "run"] {
        assert!(seen.contains(kind), "no block is checked as {kind}");
    }
    // The whole driver the guide shows is at most 60 lines.
    let whole = blocks.iter().find(|b| b.test.starts_with("file ")).unwrap();
    assert!(
        whole.text.lines().count() <= 60,
        "the whole driver grew past 60 lines"
    );
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    assert!(
        readme.contains("(docs/plugins.md)"),
        "README does not link the guide"
    );
}

#[test]
fn the_guides_commands_run_as_written() {
    let work = repo_root().join("target/guide-run");
    let _ = std::fs::remove_dir_all(&work);
    let path = crate::harness::path_with_agent(&work);
    // The publishing chapter pushes to a registry: a real one, on loopback.
    let registry_dir = tempfile::tempdir().unwrap();
    let registry = crate::oci::Registry::start(registry_dir.path());
    for b in blocks(&guide()).iter().filter(|b| b.test == "run") {
        let out = Command::new("bash")
            .args(["-euo", "pipefail", "-c", &b.text])
            .current_dir(&work)
            .env("PATH", &path)
            .env("REGISTRY", registry.host())
            .env_remove("CARGO_TARGET_DIR")
            // A cache of compiled dependencies shared with the other generated projects;
            // the commands' own paths (`target/…/my_driver.wasm`) are unchanged.
            .env("CARGO_BUILD_BUILD_DIR", crate::harness::shared_build_dir())
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env_remove("RUSTC_WRAPPER")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "docs/plugins.md:{}: the commands failed:\n{}\n{}",
            b.line,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stdout.contains("FAIL"), "{stdout}");
    }
}
