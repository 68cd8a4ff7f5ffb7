//! The Go-typed decode of the endpoints a cluster of one answers beyond jobs and
//! allocations: agent members, servers, join and force-leave, operator configuration,
//! system gc, scaling, job scale, deployments, fuzzy search, file streaming, node drain,
//! eligibility and evaluate, and variables. Part of the `gotypes` test, which calls
//! [`cluster`] with its agent and checker.

use paddock_tests::gotypes as go;
use serde_json::{Value, json};

use crate::gocheck::{GoCheck, req};

/// Check every cluster-level route against the running agent whose service job `web`
/// runs allocation `alloc`.
pub async fn cluster(c: &mut GoCheck<'_>, node: &str, alloc: &str) {
    c.json::<go::ServerMembers>(req("GET", "/v1/agent/members"))
        .await;
    c.json::<go::AgentServers>(req("GET", "/v1/agent/servers"))
        .await;
    for m in ["POST", "PUT"] {
        // A client's server list is itself: setting it is refused.
        c.status(
            req(m, "/v1/agent/servers")
                .query("address=10.0.0.1:4647")
                .expect(400),
        )
        .await;
        let j = c
            .json::<go::JoinResponse>(req(m, "/v1/agent/join").query("address=10.0.0.1:4648"))
            .await;
        if let Some((j, _)) = j
            && (j.num_joined != 0 || j.error.is_empty())
        {
            c.fail(format!(
                "{m} /v1/agent/join: joined {} ({:?})",
                j.num_joined, j.error
            ));
        }
        c.write(req(m, "/v1/agent/force-leave").query("node=ghost"))
            .await;
        c.write(req(m, "/v1/system/gc")).await;
        c.write(req(m, "/v1/system/reconcile/summaries")).await;
    }
    c.json::<go::RaftConfiguration>(req("GET", "/v1/operator/raft/configuration"))
        .await;
    c.json::<go::SchedulerConfigurationResponse>(req(
        "GET",
        "/v1/operator/scheduler/configuration",
    ))
    .await;
    c.json::<Vec<Option<go::ScalingPolicyListStub>>>(req("GET", "/v1/scaling/policies"))
        .await;
    c.status(
        req("GET", "/v1/scaling/policy/{id}")
            .arg("nope")
            .expect(404),
    )
    .await;

    // A scaling event without a count (the web job's deployment may still run, which
    // blocks a count, as in Nomad), and a count on the batch job.
    let note = json!({ "Target": { "Group": "g" }, "Message": "gotypes", "Meta": { "n": 1 } });
    c.json::<go::JobRegisterResponse>(req("POST", "/v1/job/{id}/scale").arg("web").body(note))
        .await;
    let scaled = json!({ "Job": { "ID": "scaled", "Type": "batch", "TaskGroups": [{ "Name": "g",
        "Tasks": [{ "Name": "t", "Driver": "mock", "Config": { "run_for": "10ms" } }] }] } });
    c.json::<go::JobRegisterResponse>(req("PUT", "/v1/jobs").body(scaled))
        .await;
    let count = json!({ "Count": 2, "Target": { "Group": "g" }, "Message": "gotypes" });
    c.json::<go::JobRegisterResponse>(req("PUT", "/v1/job/{id}/scale").arg("scaled").body(count))
        .await;
    for job in ["web", "scaled"] {
        c.json::<go::JobScaleStatusResponse>(req("GET", "/v1/job/{id}/scale").arg(job))
            .await;
    }
    let listed = c
        .json::<Vec<Option<go::Deployment>>>(req("GET", "/v1/deployments"))
        .await;
    c.json::<Vec<Option<go::Deployment>>>(req("GET", "/v1/job/{id}/deployments").arg("web"))
        .await;
    c.json::<Option<go::Deployment>>(req("GET", "/v1/job/{id}/deployment").arg("web"))
        .await;
    // The service job's registration made a deployment: read it and its allocations.
    match listed.and_then(|(l, _)| l.into_iter().flatten().next()) {
        Some(d) => {
            c.json::<go::Deployment>(req("GET", "/v1/deployment/{id}").arg(&d.ID))
                .await;
            c.json::<Vec<Option<go::AllocationListStub>>>(
                req("GET", "/v1/deployment/allocations/{id}").arg(&d.ID),
            )
            .await;
        }
        None => c.fail("GET /v1/deployments: no deployment for the service job web".into()),
    }
    c.status(req("GET", "/v1/deployment/{id}").arg("nope").expect(404))
        .await;
    c.json::<Vec<Option<go::AllocationListStub>>>(
        req("GET", "/v1/deployment/allocations/{id}").arg("nope"),
    )
    .await;

    for (m, ctx) in [("POST", "all"), ("PUT", "jobs")] {
        c.json::<go::FuzzySearchResponse>(
            req(m, "/v1/search/fuzzy").body(json!({ "Text": "we", "Context": ctx })),
        )
        .await;
    }
    let frames = c
        .raw(
            req("GET", "/v1/client/fs/stream/{alloc}")
                .arg(alloc)
                .query("path=alloc/logs/t.stdout.0&follow=false"),
        )
        .await
        .unwrap_or_default();
    let what = format!("GET /v1/client/fs/stream/{alloc}");
    for f in serde_json::Deserializer::from_slice(&frames).into_iter::<Value>() {
        match f {
            Ok(f) => {
                c.decode::<go::StreamFrame>(&what, &f);
            }
            Err(e) => c.fail(format!("{what}: StreamFrame: not JSON: {e}")),
        }
    }

    node_updates(c, node).await;
    variables(c).await;
}

/// Eligibility, drain (set, then cancelled with the node marked eligible) and evaluate.
async fn node_updates(c: &mut GoCheck<'_>, node: &str) {
    for (m, e) in [("POST", "ineligible"), ("PUT", "eligible")] {
        let body = json!({ "NodeID": node, "Eligibility": e });
        c.json::<go::NodeEligibilityUpdateResponse>(
            req(m, "/v1/node/{id}/eligibility").arg(node).body(body),
        )
        .await;
    }
    let drain = json!({ "NodeID": node, "DrainSpec": { "Deadline": 3_600_000_000_000u64, "IgnoreSystemJobs": true } });
    let cancel = json!({ "NodeID": node, "DrainSpec": null, "MarkEligible": true });
    for (m, body) in [("POST", drain), ("PUT", cancel)] {
        c.json::<go::NodeDrainUpdateResponse>(req(m, "/v1/node/{id}/drain").arg(node).body(body))
            .await;
    }
    c.json::<go::Node>(req("GET", "/v1/node/{id}").arg(node))
        .await;
    for m in ["POST", "PUT"] {
        c.json::<go::NodeEvalResponse>(req(m, "/v1/node/{id}/evaluate").arg(node))
            .await;
    }
}

/// Variables: write (PUT and POST), read, list, delete (204), and the path-less route.
async fn variables(c: &mut GoCheck<'_>) {
    for (m, path) in [("PUT", "nomad/jobs/web"), ("POST", "app/config")] {
        let body = json!({ "Path": path, "Items": { "k": "v" } });
        c.json::<go::Variable>(req(m, "/v1/var/{*path}").raw_arg(path).body(body))
            .await;
    }
    c.json::<go::Variable>(req("GET", "/v1/var/{*path}").raw_arg("app/config"))
        .await;
    c.json::<Vec<Option<go::VariableMetadata>>>(req("GET", "/v1/vars").query("prefix=app"))
        .await;
    c.write(
        req("DELETE", "/v1/var/{*path}")
            .raw_arg("app/config")
            .expect(204),
    )
    .await;
    for m in ["GET", "PUT", "POST", "DELETE"] {
        c.status(req(m, "/v1/var/").expect(400)).await;
    }
}

/// Check the ACL routes against an agent of its own with the ACL system on: bootstrap,
/// policies and tokens, each method the router takes.
pub async fn acl(c: &mut GoCheck<'_>) {
    let Some((boot, _)) = c
        .json::<go::ACLToken>(req("POST", "/v1/acl/bootstrap"))
        .await
    else {
        return;
    };
    c.token = Some(boot.SecretID.clone());
    // Once done, a second bootstrap is Nomad's 400, by either method (the Go client PUTs).
    c.status(req("PUT", "/v1/acl/bootstrap").expect(400)).await;
    let rules = r#"namespace "default" { policy = "read" }"#;
    for (m, name) in [("POST", "readers"), ("PUT", "others")] {
        let body = json!({ "Name": name, "Description": "gotypes", "Rules": rules });
        c.write(req(m, "/v1/acl/policy/{name}").arg(name).body(body))
            .await;
    }
    c.json::<Vec<Option<go::ACLPolicyListStub>>>(req("GET", "/v1/acl/policies"))
        .await;
    c.json::<go::ACLPolicy>(req("GET", "/v1/acl/policy/{name}").arg("readers"))
        .await;
    let mut made = Vec::new();
    for m in ["POST", "PUT"] {
        let body = json!({ "Name": "reader", "Type": "client", "Policies": ["readers"] });
        if let Some((t, _)) = c
            .json::<go::ACLToken>(req(m, "/v1/acl/token").body(body))
            .await
        {
            made.push(t.AccessorID);
        }
    }
    c.json::<Vec<Option<go::ACLTokenListStub>>>(req("GET", "/v1/acl/tokens"))
        .await;
    for (id, m) in made.iter().zip(["POST", "PUT"]) {
        c.json::<go::ACLToken>(req("GET", "/v1/acl/token/{accessor}").arg(id))
            .await;
        let body = json!({ "AccessorID": id, "Name": "renamed", "Type": "client", "Policies": ["others"] });
        c.json::<go::ACLToken>(req(m, "/v1/acl/token/{accessor}").arg(id).body(body))
            .await;
        c.write(req("DELETE", "/v1/acl/token/{accessor}").arg(id))
            .await;
    }
    c.write(req("DELETE", "/v1/acl/policy/{name}").arg("others"))
        .await;
    // One-time tokens: issued for the caller's token, exchanged once.
    for m in ["POST", "PUT"] {
        let Some((issued, _)) = c
            .json::<go::OneTimeTokenUpsertResponse>(req(m, "/v1/acl/token/onetime"))
            .await
        else {
            continue;
        };
        let Some(ott) = issued.OneTimeToken else {
            c.failures
                .push(format!("{m} /v1/acl/token/onetime: no OneTimeToken"));
            continue;
        };
        let body = json!({ "OneTimeSecretID": ott.OneTimeSecretID });
        c.json::<go::OneTimeTokenExchangeResponse>(
            req(m, "/v1/acl/token/onetime/exchange").body(body),
        )
        .await;
    }
}
