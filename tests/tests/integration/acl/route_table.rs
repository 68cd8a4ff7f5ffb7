//! The routes and the tokens that pass and fail each, for [`super::routes`]: what Nomad
//! checks for each route (the table of `paddock::acl::check`), and something near it.

use serde_json::{Value, json};

/// `namespace "default"` with these capabilities.
pub(super) fn caps(c: &[&str]) -> String {
    let list: Vec<String> = c.iter().map(|c| format!("{c:?}")).collect();
    format!(
        "namespace \"default\" {{\n  capabilities = [{}]\n}}\n",
        list.join(", ")
    )
}

pub(super) const READ: &str = "namespace \"default\" {\n  policy = \"read\"\n}\n";
pub(super) const WRITE: &str = "namespace \"default\" {\n  policy = \"write\"\n}\n";
pub(super) const NODE_R: &str = "node {\n  policy = \"read\"\n}\n";
pub(super) const NODE_W: &str = "node {\n  policy = \"write\"\n}\n";
pub(super) const AGENT_R: &str = "agent {\n  policy = \"read\"\n}\n";
pub(super) const AGENT_W: &str = "agent {\n  policy = \"write\"\n}\n";
pub(super) const OP_R: &str = "operator {\n  policy = \"read\"\n}\n";
/// Grants nothing.
pub(super) const NOTHING: &str = "node {\n  policy = \"deny\"\n}\n";
/// Stands for the management token.
pub(super) const MGMT: &str = "management";

pub(super) fn vars(path: &str, c: &[&str]) -> String {
    let list: Vec<String> = c.iter().map(|c| format!("{c:?}")).collect();
    format!(
        "namespace \"default\" {{\n  variables {{\n    path {path:?} {{\n      capabilities = [{}]\n    }}\n  }}\n}}\n",
        list.join(", ")
    )
}

/// One route: method, path, body, the rules that each pass, the rules that each are
/// refused.
pub(super) struct Row {
    pub method: &'static str,
    pub path: String,
    pub body: Option<Value>,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

fn row(
    method: &'static str,
    path: &str,
    body: Option<Value>,
    allow: &[&str],
    deny: &[&str],
) -> Row {
    Row {
        method,
        path: path.into(),
        body,
        allow: allow.iter().map(|s| s.to_string()).collect(),
        deny: deny.iter().map(|s| s.to_string()).collect(),
    }
}

/// Every route: `alloc` a running allocation, `eval` an evaluation, `node` the node.
pub(super) fn table(alloc: &str, eval: &str, node: &str) -> Vec<Row> {
    // An allocation id no allocation has: routes that change an allocation are checked
    // in `default` without touching the running one.
    let ghost = "00000000-0000-4000-8000-000000000000";
    let read_job = caps(&["read-job"]);
    let list_jobs = caps(&["list-jobs"]);
    let submit = caps(&["submit-job"]);
    let lifecycle = caps(&["alloc-lifecycle"]);
    let ns_and_node_w = format!("{WRITE}{NODE_W}");
    let ns_and_agent_w = format!("{WRITE}{AGENT_W}");
    let every_rule = format!("{WRITE}{NODE_W}{AGENT_W}{OP_R}");
    let (r, l, s) = (read_job.as_str(), list_jobs.as_str(), submit.as_str());
    let fs = |op: &str| {
        format!(
            "/v1/client/fs/{op}/{alloc}?path=alloc/logs/t.stdout.0&task=t&type=stdout&plain=true&offset=0&limit=5&follow=false"
        )
    };
    let mut rows = vec![
        row("GET", "/v1/jobs", None, &[l], &[r]),
        row("GET", "/v1/jobs?namespace=*", None, &[l], &[r]),
        row(
            "POST",
            "/v1/jobs",
            Some(json!({})),
            &[s, &caps(&["register-job"])],
            &[READ, &caps(&["plan-job"])],
        ),
        row(
            "POST",
            "/v1/jobs/parse",
            Some(json!({ "JobHCL": "job \"x\" {}" })),
            &[&caps(&["parse-job"]), s],
            &[&caps(&["read-job", "list-jobs"])],
        ),
        row(
            "POST",
            "/v1/validate/job",
            Some(json!({ "Job": { "ID": "v" } })),
            &[r],
            &[s],
        ),
        row(
            "POST",
            "/v1/job/nosuch",
            Some(json!({})),
            &[s, &caps(&["register-job"])],
            &[READ, &caps(&["revert-job"])],
        ),
        // Stopping a job and purging it are separate capabilities; `submit-job` covers both.
        row(
            "DELETE",
            "/v1/job/nosuch",
            None,
            &[s, &caps(&["deregister-job"])],
            &[READ, &caps(&["purge-job"])],
        ),
        row(
            "DELETE",
            "/v1/job/nosuch?purge=true",
            None,
            &[s, &caps(&["purge-job"])],
            &[READ, &caps(&["deregister-job"])],
        ),
        row(
            "POST",
            "/v1/job/nosuch/plan",
            Some(json!({})),
            &[s, &caps(&["plan-job"])],
            &[READ, &caps(&["register-job"])],
        ),
        row(
            "POST",
            "/v1/job/nosuch/revert",
            Some(json!({ "JobVersion": 0 })),
            &[s, &caps(&["revert-job"])],
            &[READ, &caps(&["register-job"])],
        ),
        row(
            "POST",
            "/v1/job/nosuch/stable",
            Some(json!({})),
            &[s, &caps(&["stable-job"])],
            &[READ, &caps(&["tag-job-version"])],
        ),
        row(
            "POST",
            "/v1/job/nosuch/evaluate",
            Some(json!({})),
            &[s, &caps(&["evaluate-job"])],
            &[READ, &caps(&["register-job"])],
        ),
        row(
            "POST",
            "/v1/job/nosuch/dispatch",
            Some(json!({})),
            &[&caps(&["dispatch-job"])],
            &[s],
        ),
        row(
            "POST",
            "/v1/job/nosuch/periodic/force",
            None,
            &[&caps(&["dispatch-job"]), s, &caps(&["force-periodic-job"])],
            &[READ, &caps(&["register-job"])],
        ),
        row(
            "GET",
            "/v1/job/web/scale",
            None,
            &[&caps(&["read-job-scaling"]), r],
            &[l],
        ),
        row(
            "POST",
            "/v1/job/nosuch/scale",
            Some(json!({})),
            &[&caps(&["scale-job"]), s],
            &[READ],
        ),
        row("GET", "/v1/allocations", None, &[r], &[l]),
        row("GET", &format!("/v1/allocation/{alloc}"), None, &[r], &[l]),
        row(
            "POST",
            &format!("/v1/allocation/{ghost}/stop"),
            None,
            &[&lifecycle],
            &[&caps(&["read-job", "submit-job"])],
        ),
        row(
            "POST",
            &format!("/v1/client/allocation/{ghost}/restart"),
            Some(json!({})),
            &[&lifecycle],
            &[&caps(&["read-job", "submit-job"])],
        ),
        row(
            "POST",
            &format!("/v1/client/allocation/{ghost}/signal"),
            Some(json!({})),
            &[&lifecycle],
            &[&caps(&["read-job", "submit-job"])],
        ),
        // Passed, the handler refuses a request that is no websocket upgrade.
        row(
            "GET",
            &format!("/v1/client/allocation/{ghost}/exec?task=t&command=%5B%22%2Fbin%2Ftrue%22%5D"),
            None,
            &[&caps(&["alloc-exec"])],
            &[&caps(&["read-job", "alloc-lifecycle", "alloc-node-exec"])],
        ),
        row(
            "GET",
            &format!("/v1/client/allocation/{alloc}/stats"),
            None,
            &[r],
            &[l],
        ),
        row(
            "POST",
            &format!("/v1/client/allocation/{ghost}/gc"),
            None,
            &[s, &caps(&["gc-allocation"])],
            &[
                &caps(&["read-job", "alloc-lifecycle"]),
                &caps(&["pause-allocation"]),
            ],
        ),
        row(
            "GET",
            &fs("logs"),
            None,
            &[&caps(&["read-logs"]), &caps(&["read-fs"])],
            &[r],
        ),
        row("GET", "/v1/evaluations", None, &[r], &[l]),
        row("GET", "/v1/evaluations/count", None, &[r], &[l]),
        row("GET", &format!("/v1/evaluation/{eval}"), None, &[r], &[l]),
        row(
            "GET",
            &format!("/v1/evaluation/{eval}/allocations"),
            None,
            &[r],
            &[l],
        ),
        row("GET", "/v1/deployments", None, &[r], &[l]),
        row("GET", "/v1/deployment/nosuch", None, &[r], &[l]),
        row("GET", "/v1/deployment/allocations/nosuch", None, &[r], &[l]),
        row(
            "GET",
            "/v1/scaling/policies",
            None,
            &[
                &caps(&["list-scaling-policies"]),
                &caps(&["list-jobs", "read-job"]),
            ],
            &[l, r],
        ),
        row(
            "GET",
            "/v1/scaling/policy/nosuch",
            None,
            &[
                &caps(&["read-scaling-policy"]),
                &caps(&["list-jobs", "read-job"]),
            ],
            &[r],
        ),
        row(
            "GET",
            "/v1/agent/members",
            None,
            &[NODE_R],
            &[&ns_and_agent_w],
        ),
        row("GET", "/v1/client/stats", None, &[NODE_R], &[WRITE]),
        row("GET", "/v1/nodes", None, &[NODE_R], &[WRITE]),
        row(
            "GET",
            &format!("/v1/node/{node}"),
            None,
            &[NODE_R],
            &[WRITE],
        ),
        row(
            "GET",
            &format!("/v1/node/{node}/allocations"),
            None,
            &[NODE_R],
            &[WRITE],
        ),
        row(
            "POST",
            "/v1/node/nosuch/drain",
            Some(json!({})),
            &[NODE_W],
            &[NODE_R],
        ),
        row(
            "POST",
            "/v1/node/nosuch/eligibility",
            Some(json!({})),
            &[NODE_W],
            &[NODE_R],
        ),
        row(
            "POST",
            "/v1/node/nosuch/evaluate",
            None,
            &[NODE_W],
            &[NODE_R],
        ),
        row("POST", "/v1/client/gc", None, &[NODE_W], &[NODE_R]),
        row("GET", "/v1/agent/self", None, &[AGENT_R], &[&ns_and_node_w]),
        row(
            "GET",
            "/v1/agent/servers",
            None,
            &[AGENT_R],
            &[&ns_and_node_w],
        ),
        row("GET", "/v1/components", None, &[AGENT_R], &[&ns_and_node_w]),
        row("POST", "/v1/agent/servers", None, &[AGENT_W], &[AGENT_R]),
        row("POST", "/v1/agent/join", None, &[AGENT_W], &[AGENT_R]),
        row(
            "POST",
            "/v1/agent/force-leave",
            None,
            &[AGENT_W],
            &[AGENT_R],
        ),
        row(
            "POST",
            "/v1/components/reload",
            None,
            &[AGENT_W],
            &[AGENT_R],
        ),
        row(
            "POST",
            "/v1/components/pull",
            Some(json!({ "Name": "nothing-pulled" })),
            &[AGENT_W],
            &[AGENT_R],
        ),
        row(
            "POST",
            "/v1/components/approve",
            Some(json!({ "Name": "nothing-held" })),
            &[AGENT_W],
            &[AGENT_R],
        ),
        row(
            "GET",
            "/v1/operator/raft/configuration",
            None,
            &[OP_R],
            &[AGENT_W],
        ),
        row(
            "GET",
            "/v1/operator/scheduler/configuration",
            None,
            &[OP_R],
            &[AGENT_W],
        ),
        row("POST", "/v1/system/gc", None, &[MGMT], &[&every_rule]),
        row(
            "POST",
            "/v1/system/reconcile/summaries",
            None,
            &[MGMT],
            &[&every_rule],
        ),
        row("GET", "/v1/acl/tokens", None, &[MGMT], &[&every_rule]),
        // Variables: only `variables` blocks grant them, never a namespace's policy.
        row(
            "GET",
            "/v1/var/app/one",
            None,
            &[&vars("app/*", &["read"])],
            &[WRITE],
        ),
        row(
            "PUT",
            "/v1/var/app/new",
            Some(json!({ "Items": { "a": "b" } })),
            &[&vars("app/*", &["write"])],
            &[&vars("app/*", &["read", "list"])],
        ),
        row(
            "DELETE",
            "/v1/var/app/gone",
            None,
            &[&vars("app/*", &["destroy"])],
            &[&vars("app/*", &["write", "read"])],
        ),
        row("GET", "/v1/vars", None, &[NOTHING], &[]),
        row(
            "POST",
            "/v1/search",
            Some(json!({ "Prefix": "", "Context": "jobs" })),
            &[r],
            &[l],
        ),
        row(
            "POST",
            "/v1/search",
            Some(json!({ "Prefix": "", "Context": "nodes" })),
            &[NODE_R],
            &[WRITE],
        ),
        row(
            "POST",
            "/v1/search",
            Some(json!({ "Prefix": "", "Context": "all" })),
            &[NOTHING],
            &[],
        ),
        row(
            "POST",
            "/v1/search/fuzzy",
            Some(json!({ "Text": "web", "Context": "jobs" })),
            &[r],
            &[l],
        ),
        row(
            "POST",
            "/v1/search/fuzzy",
            Some(json!({ "Text": "web", "Context": "jobs", "Namespace": "*" })),
            &[NOTHING],
            &[],
        ),
        row("GET", "/v1/event/stream?topic=Job", None, &[r], &[l]),
        row("GET", "/v1/event/stream?topic=Service", None, &[r], &[l]),
        row(
            "GET",
            "/v1/event/stream?topic=Node",
            None,
            &[NODE_R],
            &[WRITE],
        ),
        row("GET", "/v1/event/stream", None, &[MGMT], &[&every_rule]),
        row(
            "GET",
            "/v1/event/stream?topic=*",
            None,
            &[MGMT],
            &[&every_rule],
        ),
    ];
    // Changing a deployment takes `submit-job` or the change's own capability; reading
    // the job, or another change's capability, is not enough (Nomad's
    // nomad/deployment_endpoint.go). Nomad has no capability of its own for `run`.
    for (method, op, own, other) in [
        ("POST", "fail", "fail-deployment", "cancel-deployment"),
        ("POST", "pause", "pause-deployment", "unblock-deployment"),
        ("PUT", "promote", "promote-deployment", "fail-deployment"),
        ("POST", "unblock", "unblock-deployment", "pause-deployment"),
        ("POST", "cancel", "cancel-deployment", "fail-deployment"),
        (
            "POST",
            "allocation-health",
            "set-alloc-health-deployment",
            "promote-deployment",
        ),
    ] {
        let path = format!("/v1/deployment/{op}/nosuch");
        let (own, other) = (caps(&[own]), caps(&[other]));
        rows.push(row(method, &path, None, &[s, &own], &[r, &other]));
    }
    rows.push(row(
        "POST",
        "/v1/deployment/run/nosuch",
        None,
        &[s],
        &[r, &caps(&["promote-deployment"])],
    ));
    for op in ["ls", "stat", "cat", "readat", "stream"] {
        rows.push(row(
            "GET",
            &fs(op),
            None,
            &[&caps(&["read-fs"])],
            &[&caps(&["read-logs"])],
        ));
    }
    for sub in [
        "",
        "/versions",
        "/allocations",
        "/evaluations",
        "/summary",
        "/deployments",
        "/deployment",
        "/submission?version=0",
    ] {
        rows.push(row("GET", &format!("/v1/job/web{sub}"), None, &[r], &[l]));
    }
    rows.push(row(
        "POST",
        "/v1/agent/reload",
        None,
        &[AGENT_W],
        &[AGENT_R],
    ));
    rows.push(row("GET", "/v1/var/", None, &[MGMT], &[&every_rule]));
    // Namespaces: any token lists (the answer filtered), any capability reads one,
    // only management writes.
    rows.push(row("GET", "/v1/namespaces", None, &[NOTHING], &[]));
    rows.push(row("GET", "/v1/namespace/default", None, &[r], &[NODE_W]));
    for (method, path) in [("PUT", "/v1/namespace/made"), ("POST", "/v1/namespace")] {
        let body = json!({ "Name": "made" });
        rows.push(row(method, path, Some(body), &[MGMT], &[&every_rule]));
    }
    rows.push(row(
        "DELETE",
        "/v1/namespace/gone",
        None,
        &[MGMT],
        &[&every_rule],
    ));
    // Services: `read-job` reads; a registration is deleted with `submit-job` or
    // `delete-service-registration` (Nomad's `AllowNsOpAnyOf`).
    rows.push(row("GET", "/v1/services", None, &[r], &[l]));
    rows.push(row("GET", "/v1/service/web", None, &[r], &[l]));
    rows.push(row(
        "DELETE",
        "/v1/service/web/nosuch",
        None,
        &[s, &caps(&["delete-service-registration"])],
        &[r],
    ));
    rows.push(row(
        "GET",
        &format!("/v1/allocation/{alloc}/services"),
        None,
        &[r],
        &[l],
    ));
    rows.push(row(
        "GET",
        &format!("/v1/client/allocation/{alloc}/checks"),
        None,
        &[r],
        &[l],
    ));
    // Open routes look at no token.
    for path in [
        "/v1/agent/health",
        "/v1/status/leader",
        "/v1/status/peers",
        "/v1/regions",
        "/v1/metrics",
    ] {
        rows.push(row("GET", path, None, &[NOTHING], &[]));
    }

    rows
}
