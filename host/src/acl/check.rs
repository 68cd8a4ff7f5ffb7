//! What each API endpoint asks of a token: the capability Nomad checks for the same
//! endpoint, in the namespace of the object it touches.

use super::Level;

/// Where the namespace a check is made in comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NsFrom {
    /// `?namespace=` (default `default`; `*` for every namespace, which only a rule for
    /// the namespace glob `*` or a management token covers).
    Query,
    /// The namespace of the allocation with this ID (or ID prefix).
    Alloc(String),
    /// The namespace of the evaluation with this ID.
    Eval(String),
    /// The request body's `Job.Namespace` (a registration's) or `Namespace` (a search's).
    JobBody,
}

/// What a request needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// Nothing: open to all, as in Nomad (health, leader, regions, metrics).
    Open,
    /// A management token.
    Management,
    /// One of these namespace capabilities.
    Ns(&'static [&'static str], NsFrom),
    Node(Level),
    /// A node's allocations: `node:read`, and `read-job` in every namespace (they may be
    /// in any).
    NodeAllocs,
    Agent(Level),
    Operator(Level),
    /// A variable operation (`list`, `read`, `write`, `destroy`) on a path.
    Variable(&'static str, String),
    /// Per the event stream's topics.
    Events,
    /// The ACL endpoints, which check the caller themselves.
    AclApi,
}

use Need::*;
use NsFrom::*;

const READ_JOB: &[&str] = &["read-job"];
const SUBMIT_JOB: &[&str] = &["submit-job"];

/// The need of `method` on `path`.
pub fn need(method: &str, path: &str) -> Need {
    let seg: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let get = method == "GET" || method == "HEAD";
    match seg.as_slice() {
        ["v1", "acl", ..] => AclApi,
        ["v1", "agent", "health"] | ["v1", "status", ..] | ["v1", "regions"] => Open,
        ["v1", "metrics"] => Open,
        ["v1", "jobs"] if get => Ns(&["list-jobs"], Query),
        ["v1", "jobs"] => Ns(SUBMIT_JOB, JobBody),
        ["v1", "jobs", "parse"] => Ns(&["parse-job"], Query),
        ["v1", "validate", "job"] => Ns(READ_JOB, JobBody),
        ["v1", "job", _] if get => Ns(READ_JOB, Query),
        ["v1", "job", _] if method == "DELETE" => Ns(SUBMIT_JOB, Query),
        ["v1", "job", _] => Ns(SUBMIT_JOB, JobBody),
        ["v1", "job", _, "plan"] => Ns(SUBMIT_JOB, JobBody),
        ["v1", "job", _, "dispatch"] => Ns(&["dispatch-job"], Query),
        ["v1", "job", _, "scale"] if get => Ns(&["read-job-scaling", "read-job"], Query),
        ["v1", "job", _, "scale"] => Ns(&["scale-job", "submit-job"], Query),
        ["v1", "job", _, "revert" | "stable" | "evaluate"] => Ns(SUBMIT_JOB, Query),
        ["v1", "job", _, "periodic", "force"] => Ns(SUBMIT_JOB, Query),
        ["v1", "job", ..] => Ns(READ_JOB, Query),
        ["v1", "allocations"] => Ns(READ_JOB, Query),
        ["v1", "allocation", id] => Ns(READ_JOB, Alloc(id.to_string())),
        ["v1", "allocation", id, "stop"] => Ns(&["alloc-lifecycle"], Alloc(id.to_string())),
        ["v1", "allocation", id, ..] => Ns(READ_JOB, Alloc(id.to_string())),
        ["v1", "client", "allocation", id, "restart" | "signal"] => {
            Ns(&["alloc-lifecycle"], Alloc(id.to_string()))
        }
        ["v1", "client", "allocation", id, "gc"] => Ns(SUBMIT_JOB, Alloc(id.to_string())),
        ["v1", "client", "allocation", id, "exec"] => Ns(&["alloc-exec"], Alloc(id.to_string())),
        ["v1", "client", "allocation", id, ..] => Ns(READ_JOB, Alloc(id.to_string())),
        ["v1", "client", "fs", "logs", id] => Ns(&["read-logs"], Alloc(id.to_string())),
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
        ["v1", "evaluations"] => Ns(READ_JOB, Query),
        ["v1", "evaluation", id, ..] => Ns(READ_JOB, Eval(id.to_string())),
        ["v1", "deployments"] | ["v1", "deployment", ..] => Ns(READ_JOB, Query),
        ["v1", "scaling", "policies"] => Ns(&["list-scaling-policies"], Query),
        ["v1", "scaling", "policy", _] => Ns(&["read-scaling-policy"], Query),
        ["v1", "search", ..] => Ns(&["list-jobs", "read-job"], JobBody),
        ["v1", "event", "stream"] => Events,
        ["v1", "vars"] => Variable("list", String::new()),
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
        assert_eq!(need("GET", "/v1/jobs"), Ns(&["list-jobs"], Query));
        assert_eq!(need("POST", "/v1/jobs"), Ns(SUBMIT_JOB, JobBody));
        assert_eq!(need("GET", "/v1/job/x/allocations"), Ns(READ_JOB, Query));
        assert_eq!(
            need("GET", "/v1/client/fs/logs/abc"),
            Ns(&["read-logs"], Alloc("abc".into()))
        );
        assert_eq!(
            need("GET", "/v1/client/fs/cat/abc"),
            Ns(&["read-fs"], Alloc("abc".into()))
        );
        assert_eq!(
            need("POST", "/v1/allocation/abc/stop"),
            Ns(&["alloc-lifecycle"], Alloc("abc".into()))
        );
        assert_eq!(need("POST", "/v1/node/n/drain"), Node(Level::Write));
        assert_eq!(need("GET", "/v1/agent/self"), Agent(Level::Read));
        assert_eq!(need("GET", "/v1/agent/health"), Open);
        assert_eq!(need("PUT", "/v1/var/a/b"), Variable("write", "a/b".into()));
        assert_eq!(need("PUT", "/v1/system/gc"), Management);
    }
}
