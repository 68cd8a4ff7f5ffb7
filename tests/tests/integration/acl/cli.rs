//! `agent acl ...` against a real agent with the ACL system on: bootstrap, policy apply,
//! token create and self, as `nomad acl ...` does them.

use serde_json::Value;

use crate::harness::AgentProcess;

/// `agent acl ...` with `NOMAD_ADDR` and `NOMAD_TOKEN`, as `nomad acl ...`.
fn cli(a: &AgentProcess, token: Option<&str>, args: &[&str]) -> (bool, String, String) {
    let mut c = std::process::Command::new(crate::harness::agent_bin());
    c.args(args)
        .env("NOMAD_ADDR", a.url(""))
        .env_remove("NOMAD_TOKEN");
    if let Some(t) = token {
        c.env("NOMAD_TOKEN", t);
    }
    let out = c.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_bootstraps_applies_policies_and_makes_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = AgentProcess::new(dir.path());
    a.args = vec!["--acl-enabled".into()];
    a.start().await;

    let (ok, out, err) = cli(&a, None, &["acl", "bootstrap"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("Bootstrap Token") && out.contains("management"),
        "{out}"
    );
    let mgmt = out
        .lines()
        .find_map(|l| l.strip_prefix("Secret ID")?.split('=').nth(1))
        .unwrap()
        .trim()
        .to_string();
    let (ok, _, err) = cli(&a, None, &["acl", "bootstrap"]);
    assert!(!ok && err.contains("ACL bootstrap already done"), "{err}");

    let bad = dir.path().join("bad.hcl");
    std::fs::write(&bad, "node {\n  policy = \"all\"\n}\n").unwrap();
    let (ok, _, err) = cli(
        &a,
        Some(&mgmt),
        &["acl", "policy", "apply", "bad", bad.to_str().unwrap()],
    );
    assert!(!ok && err.contains("Invalid node policy"), "{err}");
    let file = dir.path().join("readonly.hcl");
    std::fs::write(
        &file,
        "namespace \"default\" {\n  policy = \"read\"\n}\nnode {\n  policy = \"read\"\n}\n",
    )
    .unwrap();
    let (ok, out, err) = cli(
        &a,
        Some(&mgmt),
        &[
            "acl",
            "policy",
            "apply",
            "-description",
            "Read the default namespace",
            "readonly",
            file.to_str().unwrap(),
        ],
    );
    assert!(
        ok && out.contains("Successfully wrote \"readonly\""),
        "{out}{err}"
    );

    let (ok, out, err) = cli(
        &a,
        Some(&mgmt),
        &[
            "acl", "token", "create", "-name", "reader", "-type", "client", "-policy", "readonly",
            "-json",
        ],
    );
    assert!(ok, "{err}");
    let t: Value = serde_json::from_str(&out).unwrap();
    let reader = t["SecretID"].as_str().unwrap();
    let (ok, out, err) = cli(&a, Some(reader), &["acl", "token", "self"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("reader") && out.contains("readonly") && out.contains(reader),
        "{out}"
    );
    let (ok, _, err) = cli(&a, Some(reader), &["node", "status"]);
    assert!(ok, "{err}");
    let (ok, _, err) = cli(&a, Some(reader), &["acl", "token", "list"]);
    assert!(!ok && err.contains("Permission denied"), "{err}");
    let (ok, out, _) = cli(&a, Some(&mgmt), &["acl", "token", "list"]);
    assert!(
        ok && out.contains("Bootstrap Token") && out.contains("reader"),
        "{out}"
    );
    a.interrupt();
}
