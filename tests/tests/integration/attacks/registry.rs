//! A publisher, or whoever can push to the repository a plugin block names, against the
//! agent that pulls from it: another component's name to take its grants, a layer past the
//! size limit, a layer that is not a component, a valid signature replayed onto another
//! digest, a file in a components folder taking the pulled plugin's name, and a cache
//! altered on disk while the registry is down. Each is refused, naming why; what ran before
//! keeps running.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::AgentProcess;
use crate::oci::{Publisher, Registry, openssl_key, with_section};

/// `POST /v1/components/pull` for `sleeper`: the outcome and its detail.
async fn pull(agent: &AgentProcess) -> (String, String) {
    let v: Value = agent
        .http
        .post(agent.url("/v1/components/pull"))
        .json(&json!({ "Name": "sleeper" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    (
        v["Outcome"].as_str().unwrap().to_string(),
        v["Detail"].as_str().unwrap().to_string(),
    )
}

async fn component(agent: &AgentProcess, name: &str, state: &str) -> Option<Value> {
    agent.get("/v1/components").await["Components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["Name"] == name && c["State"] == state)
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_registry_serves_is_refused_unless_it_is_the_signed_component_of_that_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut registry = Registry::start(d);
    let publisher = Publisher::new(registry.host()).await;
    let (key, public) = openssl_key(d, "publisher");
    let repo = "evil/sleeper";
    let target = format!("{repo}:latest");
    let sleeper = guest_artifacts::SLEEPER_DRIVER.bytes.to_vec();
    let d1 = publisher.push(d, &target, &sleeper);
    publisher.sign(repo, &d1, &key);

    // A components folder holding a file that reports the pulled plugin's name.
    let comps = d.join("components");
    std::fs::create_dir_all(&comps).unwrap();
    std::fs::write(
        comps.join("sleeper.wasm"),
        with_section(&sleeper, "build", b"file"),
    )
    .unwrap();
    let cfg = d.join("agent.hcl");
    std::fs::write(
        &cfg,
        format!(
            "plugin \"sleeper\" {{\n  source = \"oci://{}/{target}\"\n  max_size = \"600KiB\"\n  verify {{\n    key = \"{}\"\n  }}\n}}\n",
            registry.host(),
            public.display()
        ),
    )
    .unwrap();
    let mut agent = AgentProcess::new(d);
    agent.args = vec![
        "--config".into(),
        cfg.display().to_string(),
        "--components".into(),
        comps.display().to_string(),
    ];
    agent.start().await;
    let served = component(&agent, "sleeper", "active").await.unwrap();
    assert_eq!(served["Digest"], d1.as_str(), "{served:#}");
    let refusals = agent.get("/v1/components").await["Refused"].to_string();
    assert!(
        refusals.contains("sleeper.wasm") && refusals.contains("names a source"),
        "the file took the pulled plugin's name: {refusals}"
    );

    // raw_exec's bytes behind the tag, signed: it would take raw_exec's name and grants.
    let d2 = publisher.push(d, &target, guest_artifacts::RAW_EXEC_DRIVER.bytes);
    publisher.sign(repo, &d2, &key);
    let (outcome, detail) = pull(&agent).await;
    assert_eq!(outcome, "refused", "{detail}");
    assert!(
        detail.contains("reports the name \"raw_exec\"") && detail.contains("plugin \"sleeper\""),
        "{detail}"
    );
    let raw_exec = component(&agent, "raw_exec", "active").await.unwrap();
    assert!(
        raw_exec["Source"].as_str().unwrap().starts_with("built-in"),
        "{raw_exec:#}"
    );

    // Past max_size: refused from the manifest, before the layer is fetched.
    let big = with_section(&sleeper, "padding", &vec![0u8; 200 << 10]);
    let d3 = publisher.push(d, &target, &big);
    publisher.sign(repo, &d3, &key);
    let (outcome, detail) = pull(&agent).await;
    assert_eq!(outcome, "refused", "{detail}");
    assert!(detail.contains("over the limit of 614400"), "{detail}");

    // A layer that is not a component's media type.
    let file = d.join("octets.wasm");
    std::fs::write(&file, &sleeper).unwrap();
    let d4 = publisher.run(&[
        "push",
        &registry.host(),
        &target,
        file.to_str().unwrap(),
        "application/octet-stream",
    ]);
    publisher.sign(repo, &d4, &key);
    let (outcome, detail) = pull(&agent).await;
    assert_eq!(outcome, "refused", "{detail}");
    assert!(detail.contains("\"application/octet-stream\""), "{detail}");

    // The first version's valid signature, replayed onto a new digest's signature tag.
    let d5 = publisher.push(d, &target, &with_section(&sleeper, "build", b"5"));
    publisher.run(&[
        "sign",
        &registry.host(),
        repo,
        &d1,
        key.to_str().unwrap(),
        &d5,
    ]);
    let (outcome, detail) = pull(&agent).await;
    assert_eq!(outcome, "refused", "{detail}");
    assert!(
        detail.contains(&format!("signs {d1}, not this digest")),
        "{detail}"
    );
    let served = component(&agent, "sleeper", "active").await.unwrap();
    assert_eq!(
        served["Digest"],
        d1.as_str(),
        "every refusal kept the first version"
    );

    // The registry goes down and the cached component is altered on disk: not run.
    agent.kill9();
    registry.stop();
    let blobs = d.join("data/cache/pulled/blobs/sha256");
    let blob = std::fs::read_dir(&blobs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&blob).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&blob, bytes).unwrap();
    agent.start().await;
    assert!(component(&agent, "sleeper", "active").await.is_none());
    let refused = component(&agent, "sleeper", "refused").await.unwrap();
    assert!(
        refused["Reason"]
            .as_str()
            .unwrap()
            .contains("cannot reach it"),
        "{refused:#}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !agent.log().contains("its bytes do not match their digest") {
        assert!(std::time::Instant::now() < deadline, "{}", agent.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
