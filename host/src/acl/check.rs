//! What an API endpoint may ask of a token ([`Need`]): the capability Nomad checks for the
//! same endpoint, in the namespace of the object it touches. Each route declares its need
//! where it is routed (`api/*.rs`, collected in [`super::routes::RouteTable`]); the table
//! below is what those declarations follow.
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
//! | `GET /v1/client/allocation/:id/exec` (websocket) | `alloc-exec` in alloc ns; for a driver without filesystem isolation also `alloc-node-exec` (checked by the handler: `api/exec.rs`) |
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
    /// Reading namespace `name`: any capability in it (Nomad's `AllowNamespace`).
    Namespace(String),
    /// The namespaces list: any token; the answer keeps the namespaces where it holds
    /// any capability.
    NamespaceList,
}

pub const READ_JOB: &[&str] = &["read-job"];
