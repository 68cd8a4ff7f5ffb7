//! What each API endpoint asks of a token: the capability Nomad checks for the same
//! endpoint, in the namespace of the object it touches.
//!
//! Every row below was read from Nomad's source (the RPC handler each HTTP route calls:
//! `nomad/job_endpoint.go`, `nomad/alloc_endpoint.go`, `nomad/eval_endpoint.go`,
//! `nomad/deployment_endpoint.go`, `nomad/node_endpoint.go`, `nomad/periodic_endpoint.go`,
//! `nomad/scaling_endpoint.go`, `nomad/search_endpoint.go`, `nomad/variables_endpoint.go`,
//! `nomad/stream/event_broker.go`, `client/alloc_endpoint.go`, `client/fs_endpoint.go`,
//! `command/agent/job_endpoint.go`, `command/agent/agent_endpoint.go`), not guessed. `a | b`
//! is either capability; `a & b` both. "ns" is the request's `?namespace=` (`default`
//! when absent); "alloc ns" / "eval ns" the namespace of the object the path names.
//!
//! | Route | Needs |
//! |---|---|
//! | `GET /v1/jobs` | `list-jobs` in ns; `*`: in any namespace, each job shown only where held |
//! | `POST /v1/jobs`, `POST /v1/job/:id` | `submit-job \| register-job` in the job's namespace |
//! | `POST /v1/jobs/parse` | `parse-job \| submit-job` in ns |
//! | `POST /v1/validate/job` | `read-job` in the job's namespace |
//! | `GET /v1/job/:id`, `…/versions`, `…/allocations`, `…/evaluations`, `…/summary`, `…/deployments`, `…/deployment` | `read-job` in ns |
//! | `DELETE /v1/job/:id` | `submit-job \| deregister-job` in ns; with `?purge=true` `submit-job \| purge-job` |
//! | `POST /v1/job/:id/plan` | `submit-job \| plan-job` in the job's namespace |
//! | `POST /v1/job/:id/{revert,stable,evaluate}` | `submit-job \| {revert,stable,evaluate}-job` in ns |
//! | `POST /v1/job/:id/dispatch` | `dispatch-job` in ns |
//! | `POST /v1/job/:id/periodic/force` | `dispatch-job \| submit-job \| force-periodic-job` in ns |
//! | `GET /v1/job/:id/scale` | `read-job \| read-job-scaling` in ns |
//! | `POST /v1/job/:id/scale` | `scale-job \| submit-job` in ns |
//! | `GET /v1/allocations`, `/v1/evaluations`, `/v1/deployments` | `read-job` in ns; `*`: any namespace, each object shown only where held |
//! | `GET /v1/allocation/:id` | `read-job` in alloc ns |
//! | `POST /v1/allocation/:id/stop` | `alloc-lifecycle` in alloc ns |
//! | `POST /v1/client/allocation/:id/restart`, `…/signal` | `alloc-lifecycle` in alloc ns |
//! | `GET /v1/client/allocation/:id/stats` | `read-job` in alloc ns |
//! | `POST /v1/client/allocation/:id/gc` | `submit-job \| gc-allocation` in alloc ns |
//! | `GET /v1/client/fs/logs/:alloc` | `read-logs \| read-fs` in alloc ns |
//! | `GET /v1/client/fs/{ls,stat,cat,readat,stream}/:alloc` | `read-fs` in alloc ns |
//! | `GET /v1/evaluation/:id`, `…/allocations` | `read-job` in eval ns |
//! | `GET /v1/deployment/:id`, `/v1/deployment/allocations/:id` | `read-job` in ns |
//! | `POST /v1/deployment/{fail,pause,promote,unblock,cancel}/:id` | `submit-job \| <op>-deployment` in ns (Nomad: the deployment's namespace) |
//! | `POST /v1/deployment/run/:id` | `submit-job` in ns (Nomad has no `run-deployment`) |
//! | `POST /v1/deployment/allocation-health/:id` | `submit-job \| set-alloc-health-deployment` in ns |
//! | `GET /v1/scaling/policies` | `list-scaling-policies \| (list-jobs & read-job)` in ns; `*` filtered |
//! | `GET /v1/scaling/policy/:id` | `read-scaling-policy \| (list-jobs & read-job)` in ns |
//! | `GET /v1/nodes`, `/v1/node/:id`, `/v1/client/stats`, `/v1/agent/members` | `node:read` |
//! | `GET /v1/node/:id/allocations` | `node:read`; each allocation shown only with `read-job` in its namespace |
//! | `POST /v1/node/:id/{drain,eligibility,evaluate}`, `/v1/client/gc` | `node:write` |
//! | `GET /v1/agent/self`, `GET /v1/agent/servers` | `agent:read` |
//! | `POST /v1/agent/{servers,join,force-leave}` | `agent:write` |
//! | `GET /v1/operator/*` | `operator:read` (`POST`: `operator:write`) |
//! | `POST /v1/system/gc`, `/v1/system/reconcile/summaries` | management |
//! | `GET /v1/vars` | any token; each variable shown only where its path grants `list` |
//! | `GET /v1/var/:path` | variable `read` on the path in ns |
//! | `PUT /v1/var/:path` | variable `write` on the path in the body's (else ns) namespace |
//! | `DELETE /v1/var/:path` | variable `destroy` on the path in ns |
//! | `POST /v1/search` | by `Context`: `nodes` `node:read`; `jobs`/`allocs`/`evals`/`deployments` `read-job` in ns; `namespaces` any capability in ns; `all` any token; matches filtered per object |
//! | `POST /v1/search/fuzzy` | as `/v1/search`, and any token when the namespace is `*`; matches filtered per object |
//! | `GET /v1/event/stream` | per topic: `Job`, `Evaluation`, `Allocation`, `Deployment`, `Service` `read-job` in ns; `Node` `node:read`; any other topic, `*` or none (all topics) management |
//! | `GET /v1/agent/health`, `/v1/status/*`, `/v1/regions`, `/v1/metrics` | nothing (no token looked at) |
//! | `/v1/acl/*` | checked by the ACL endpoints themselves |
//!
//! Nomad's `tag-job-version`, `pause-allocation` and `delete-service-registration` are
//! accepted in policies; no route here serves what they guard (job version tags, task
//! pause, service registrations).
//!
//! Paddock's own `GET /v1/components` needs `agent:read` and its `POST /v1/components/reload`
//! and `/v1/agent/reload` `agent:write` (Nomad has no such routes).

use super::Level;

/// Where the namespace a check is made in comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NsFrom {
    /// `?namespace=` (default `default`; `*` only for a token whose rule for the
    /// namespace glob `*` grants it, or a management token).
    Query,
    /// `?namespace=` of a list across namespaces: as [`NsFrom::Query`], but `*` is allowed
    /// when any namespace grants the capability, and the answer keeps only the objects
    /// in namespaces that grant it (Nomad's `AllowNsOp("*")` and its list filters).
    List,
    /// The namespace of the allocation with this ID (or ID prefix).
    Alloc(String),
    /// The namespace of the evaluation with this ID.
    Eval(String),
    /// The request body's `Job.Namespace` (a registration's) or `Namespace`.
    JobBody,
}

/// What a request needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// Nothing: open to all, as in Nomad (health, leader, regions, metrics).
    Open,
    /// A management token.
    Management,
    /// One of these namespace capabilities; an entry `a+b` needs both `a` and `b`.
    Ns(&'static [&'static str], NsFrom),
    Node(Level),
    /// A node's allocations: `node:read`, and the answer keeps only the allocations in
    /// namespaces where the token holds `read-job`.
    NodeAllocs,
    Agent(Level),
    Operator(Level),
    /// A variable operation (`read`, `write`, `destroy`) on a path.
    Variable(&'static str, String),
    /// The variables list: any token; the answer keeps the variables whose path grants
    /// `list`.
    VarList,
    /// A prefix (`fuzzy: false`) or fuzzy search: per its body's `Context`.
    Search {
        fuzzy: bool,
    },
    /// Per the event stream's topics.
    Events,
    /// The ACL endpoints, which check the caller themselves.
    AclApi,
}

use Need::*;
use NsFrom::*;

const READ_JOB: &[&str] = &["read-job"];
const SUBMIT_JOB: &[&str] = &["submit-job"];
const REGISTER_JOB: &[&str] = &["submit-job", "register-job"];
const FORCE_PERIODIC: &[&str] = &["dispatch-job", "submit-job", "force-periodic-job"];

/// The need of `method` on `path`, which may carry its query (`?purge=true` changes what
/// a job's deregistration needs).
pub fn need(method: &str, path: &str) -> Need {
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    let purge = query.split('&').any(|kv| kv == "purge=true");
    let seg: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let get = method == "GET" || method == "HEAD";
    match seg.as_slice() {
        ["v1", "acl", ..] => AclApi,
        ["v1", "agent", "health"] | ["v1", "status", ..] | ["v1", "regions"] => Open,
        ["v1", "metrics"] => Open,
        ["v1", "jobs"] if get => Ns(&["list-jobs"], List),
        ["v1", "jobs"] => Ns(REGISTER_JOB, JobBody),
        ["v1", "jobs", "parse"] => Ns(&["parse-job", "submit-job"], Query),
        ["v1", "validate", "job"] => Ns(READ_JOB, JobBody),
        ["v1", "job", _] if get => Ns(READ_JOB, Query),
        ["v1", "job", _] if method == "DELETE" && purge => Ns(&["submit-job", "purge-job"], Query),
        ["v1", "job", _] if method == "DELETE" => Ns(&["submit-job", "deregister-job"], Query),
        ["v1", "job", _] => Ns(REGISTER_JOB, JobBody),
        ["v1", "job", _, "plan"] => Ns(&["submit-job", "plan-job"], JobBody),
        ["v1", "job", _, "dispatch"] => Ns(&["dispatch-job"], Query),
        ["v1", "job", _, "scale"] if get => Ns(&["read-job-scaling", "read-job"], Query),
        ["v1", "job", _, "scale"] => Ns(&["scale-job", "submit-job"], Query),
        ["v1", "job", _, "revert"] => Ns(&["submit-job", "revert-job"], Query),
        ["v1", "job", _, "stable"] => Ns(&["submit-job", "stable-job"], Query),
        ["v1", "job", _, "evaluate"] => Ns(&["submit-job", "evaluate-job"], Query),
        ["v1", "job", _, "periodic", "force"] => Ns(FORCE_PERIODIC, Query),
        ["v1", "job", ..] => Ns(READ_JOB, Query),
        ["v1", "allocations"] => Ns(READ_JOB, List),
        ["v1", "allocation", id] => Ns(READ_JOB, Alloc(id.to_string())),
        ["v1", "allocation", id, "stop"] => Ns(&["alloc-lifecycle"], Alloc(id.to_string())),
        ["v1", "allocation", id, ..] => Ns(READ_JOB, Alloc(id.to_string())),
        ["v1", "client", "allocation", id, "restart" | "signal"] => {
            Ns(&["alloc-lifecycle"], Alloc(id.to_string()))
        }
        ["v1", "client", "allocation", id, "gc"] => {
            Ns(&["submit-job", "gc-allocation"], Alloc(id.to_string()))
        }
        ["v1", "client", "allocation", id, "exec"] => Ns(&["alloc-exec"], Alloc(id.to_string())),
        ["v1", "client", "allocation", id, ..] => Ns(READ_JOB, Alloc(id.to_string())),
        ["v1", "client", "fs", "logs", id] => Ns(&["read-logs", "read-fs"], Alloc(id.to_string())),
        ["v1", "client", "fs", _, id] => Ns(&["read-fs"], Alloc(id.to_string())),
        ["v1", "client", "stats"] => Node(Level::Read),
        ["v1", "client", "gc"] => Node(Level::Write),
        ["v1", "nodes"] => Node(Level::Read),
        [
            "v1",
            "node",
            _,
            "drain" | "eligibility" | "evaluate" | "purge",
        ] => Node(Level::Write),
        ["v1", "node", _, "allocations"] => NodeAllocs,
        ["v1", "node", ..] => Node(Level::Read),
        ["v1", "agent", "members"] => Node(Level::Read),
        ["v1", "agent", "servers"] if get => Agent(Level::Read),
        ["v1", "agent", "self" | "host" | "monitor" | "schedulers"] => Agent(Level::Read),
        ["v1", "agent", ..] => Agent(Level::Write),
        ["v1", "components"] => Agent(Level::Read),
        ["v1", "components", ..] => Agent(Level::Write),
        ["v1", "operator", ..] if get => Operator(Level::Read),
        ["v1", "operator", ..] => Operator(Level::Write),
        ["v1", "system", ..] => Management,
        ["v1", "evaluations"] => Ns(READ_JOB, List),
        ["v1", "evaluation", id, ..] => Ns(READ_JOB, Eval(id.to_string())),
        ["v1", "deployments"] => Ns(READ_JOB, List),
        ["v1", "deployment", op, _] if !get => match *op {
            "fail" => Ns(&["submit-job", "fail-deployment"], Query),
            "pause" => Ns(&["submit-job", "pause-deployment"], Query),
            "promote" => Ns(&["submit-job", "promote-deployment"], Query),
            "unblock" => Ns(&["submit-job", "unblock-deployment"], Query),
            "cancel" => Ns(&["submit-job", "cancel-deployment"], Query),
            "run" => Ns(SUBMIT_JOB, Query),
            "allocation-health" => Ns(&["submit-job", "set-alloc-health-deployment"], Query),
            _ => Open,
        },
        ["v1", "deployment", ..] => Ns(READ_JOB, Query),
        ["v1", "scaling", "policies"] => Ns(&["list-scaling-policies", "list-jobs+read-job"], List),
        ["v1", "scaling", "policy", _] => Ns(&["read-scaling-policy", "list-jobs+read-job"], Query),
        ["v1", "search"] => Search { fuzzy: false },
        ["v1", "search", "fuzzy"] => Search { fuzzy: true },
        ["v1", "event", "stream"] => Events,
        ["v1", "vars"] => VarList,
        ["v1", "var", ..] => {
            let path = seg[2..].join("/");
            let op = match method {
                "GET" | "HEAD" => "read",
                "DELETE" => "destroy",
                _ => "write",
            };
            Variable(op, path)
        }
        // Paths no endpoint serves answer their 404 whoever asks.
        _ => Open,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_map_to_nomads_checks() {
        assert_eq!(need("GET", "/v1/jobs"), Ns(&["list-jobs"], List));
        assert_eq!(need("POST", "/v1/jobs"), Ns(REGISTER_JOB, JobBody));
        assert_eq!(
            need("DELETE", "/v1/job/x"),
            Ns(&["submit-job", "deregister-job"], Query)
        );
        assert_eq!(
            need("DELETE", "/v1/job/x?namespace=default&purge=true"),
            Ns(&["submit-job", "purge-job"], Query)
        );
        assert_eq!(
            need("POST", "/v1/job/x/plan"),
            Ns(&["submit-job", "plan-job"], JobBody)
        );
        assert_eq!(
            need("POST", "/v1/client/allocation/a/gc"),
            Ns(&["submit-job", "gc-allocation"], Alloc("a".into()))
        );
        assert_eq!(need("POST", "/v1/deployment/run/d"), Ns(SUBMIT_JOB, Query));
        assert_eq!(
            need("POST", "/v1/jobs/parse"),
            Ns(&["parse-job", "submit-job"], Query)
        );
        assert_eq!(need("GET", "/v1/job/x/allocations"), Ns(READ_JOB, Query));
        assert_eq!(
            need("POST", "/v1/job/x/periodic/force"),
            Ns(FORCE_PERIODIC, Query)
        );
        assert_eq!(
            need("GET", "/v1/client/fs/logs/abc"),
            Ns(&["read-logs", "read-fs"], Alloc("abc".into()))
        );
        assert_eq!(
            need("GET", "/v1/client/fs/cat/abc"),
            Ns(&["read-fs"], Alloc("abc".into()))
        );
        assert_eq!(
            need("POST", "/v1/allocation/abc/stop"),
            Ns(&["alloc-lifecycle"], Alloc("abc".into()))
        );
        assert_eq!(
            need("GET", "/v1/scaling/policies"),
            Ns(&["list-scaling-policies", "list-jobs+read-job"], List)
        );
        assert_eq!(
            need("GET", "/v1/deployment/allocations/d"),
            Ns(READ_JOB, Query)
        );
        assert_eq!(
            need("POST", "/v1/deployment/fail/d"),
            Ns(&["submit-job", "fail-deployment"], Query)
        );
        assert_eq!(
            need("PUT", "/v1/deployment/allocation-health/d"),
            Ns(&["submit-job", "set-alloc-health-deployment"], Query)
        );
        assert_eq!(need("GET", "/v1/node/n/allocations"), NodeAllocs);
        assert_eq!(need("POST", "/v1/node/n/drain"), Node(Level::Write));
        assert_eq!(need("GET", "/v1/agent/self"), Agent(Level::Read));
        assert_eq!(need("GET", "/v1/agent/health"), Open);
        assert_eq!(need("GET", "/v1/vars"), VarList);
        assert_eq!(need("PUT", "/v1/var/a/b"), Variable("write", "a/b".into()));
        assert_eq!(need("POST", "/v1/search/fuzzy"), Search { fuzzy: true });
        assert_eq!(need("PUT", "/v1/system/gc"), Management);
    }
}
