//! One list of routes: each is declared with the ACL need it has where it is routed, and
//! the list builds both the axum router and the [`RouteTable`] the gate, the UI and the
//! route-table test read.

use axum::Router;
use axum::handler::Handler;
use axum::routing::{MethodFilter, on};

use super::AppState;
use crate::acl::routes::{Declared, NeedFn, RouteTable};

/// Routes being declared.
pub(crate) struct Routes {
    router: Router<AppState>,
    declared: Vec<Declared>,
}

impl Routes {
    pub(crate) fn new() -> Self {
        Self {
            router: Router::new(),
            declared: Vec::new(),
        }
    }

    /// Serve `methods` (space-separated: `"POST PUT"`) on `path` with `handler`, needing
    /// what `need` says of each request.
    pub(crate) fn on<H, T>(
        mut self,
        methods: &'static str,
        path: &'static str,
        handler: H,
        need: NeedFn,
    ) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        for method in methods.split(' ') {
            let filter = match method {
                "GET" => MethodFilter::GET,
                "POST" => MethodFilter::POST,
                "PUT" => MethodFilter::PUT,
                "DELETE" => MethodFilter::DELETE,
                other => panic!("route {path}: method {other} is not one the API serves"),
            };
            self.router = self.router.route(path, on(filter, handler.clone()));
            self.declared.push(Declared {
                method,
                methods,
                path,
                need,
            });
        }
        self
    }

    /// These routes and `other`'s.
    pub(crate) fn merge(mut self, other: Routes) -> Self {
        self.router = self.router.merge(other.router);
        self.declared.extend(other.declared);
        self
    }

    /// The router and the table of what each of its routes needs.
    pub(crate) fn into_parts(self) -> (Router<AppState>, RouteTable) {
        (self.router, RouteTable::new(self.declared))
    }
}

#[cfg(test)]
mod tests {
    use crate::acl::Level;
    use crate::acl::check::{Need, NsFrom};

    const READ_JOB: &[&str] = &["read-job"];

    /// What Nomad checks for each route (see `acl/check.rs`), as the declarations say.
    #[test]
    fn routes_declare_nomads_checks() {
        let t = super::super::route_table();
        let need = |m: &str, p: &str| t.need(m, p);
        assert_eq!(
            need("GET", "/v1/jobs"),
            Need::Ns(&["list-jobs"], NsFrom::List)
        );
        assert_eq!(
            need("PUT", "/v1/jobs"),
            Need::Ns(&["submit-job", "register-job"], NsFrom::JobBody)
        );
        assert_eq!(
            need("DELETE", "/v1/job/x"),
            Need::Ns(&["submit-job", "deregister-job"], NsFrom::Query)
        );
        assert_eq!(
            need("DELETE", "/v1/job/x?namespace=default&purge=true"),
            Need::Ns(&["submit-job", "purge-job"], NsFrom::Query)
        );
        // `purge=false`, or a value that only starts like it, is a deregistration.
        assert_eq!(
            need("DELETE", "/v1/job/x?purge=trueish"),
            Need::Ns(&["submit-job", "deregister-job"], NsFrom::Query)
        );
        assert_eq!(
            need("POST", "/v1/job/x/plan"),
            Need::Ns(&["submit-job", "plan-job"], NsFrom::JobBody)
        );
        assert_eq!(
            need("POST", "/v1/client/allocation/a/gc"),
            Need::Ns(&["submit-job", "gc-allocation"], NsFrom::Alloc("a".into()))
        );
        assert_eq!(
            need("POST", "/v1/jobs/parse"),
            Need::Ns(&["parse-job", "submit-job"], NsFrom::Query)
        );
        assert_eq!(
            need("GET", "/v1/job/x/allocations"),
            Need::Ns(READ_JOB, NsFrom::Query)
        );
        assert_eq!(
            need("HEAD", "/v1/job/x/allocations"),
            Need::Ns(READ_JOB, NsFrom::Query)
        );
        assert_eq!(
            need("POST", "/v1/job/x/periodic/force"),
            Need::Ns(
                &["dispatch-job", "submit-job", "force-periodic-job"],
                NsFrom::Query
            )
        );
        assert_eq!(
            need("GET", "/v1/client/fs/logs/abc"),
            Need::Ns(&["read-logs", "read-fs"], NsFrom::Alloc("abc".into()))
        );
        assert_eq!(
            need("GET", "/v1/client/fs/cat/abc?path=x"),
            Need::Ns(&["read-fs"], NsFrom::Alloc("abc".into()))
        );
        assert_eq!(
            need("POST", "/v1/allocation/abc/stop"),
            Need::Ns(&["alloc-lifecycle"], NsFrom::Alloc("abc".into()))
        );
        assert_eq!(
            need("GET", "/v1/evaluation/e/allocations"),
            Need::Ns(READ_JOB, NsFrom::Eval("e".into()))
        );
        assert_eq!(
            need("GET", "/v1/scaling/policies"),
            Need::Ns(
                &["list-scaling-policies", "list-jobs+read-job"],
                NsFrom::List
            )
        );
        assert_eq!(
            need("GET", "/v1/deployment/allocations/d"),
            Need::Ns(READ_JOB, NsFrom::Query)
        );
        assert_eq!(need("GET", "/v1/node/n/allocations"), Need::NodeAllocs);
        assert_eq!(need("POST", "/v1/node/n/drain"), Need::Node(Level::Write));
        assert_eq!(need("GET", "/v1/agent/self"), Need::Agent(Level::Read));
        assert_eq!(need("POST", "/v1/agent/servers"), Need::Agent(Level::Write));
        assert_eq!(need("GET", "/v1/agent/health"), Need::Open);
        assert_eq!(need("GET", "/v1/vars"), Need::VarList);
        assert_eq!(
            need("PUT", "/v1/var/a/b"),
            Need::Variable("write", "a/b".into())
        );
        assert_eq!(
            need("DELETE", "/v1/var/a"),
            Need::Variable("destroy", "a".into())
        );
        assert_eq!(
            need("POST", "/v1/search/fuzzy"),
            Need::Search { fuzzy: true }
        );
        assert_eq!(need("PUT", "/v1/system/gc"), Need::Management);
        assert_eq!(need("GET", "/v1/acl/token/self"), Need::AclApi);
        // No route, or not this method: the 404 or 405 is answered whoever asks.
        assert_eq!(need("GET", "/v1/nothing/here"), Need::Open);
        assert_eq!(need("DELETE", "/v1/jobs"), Need::Open);
    }

    /// Every route declares a need; the only open ones are those Nomad leaves open.
    #[test]
    fn only_nomads_open_routes_are_open() {
        let t = super::super::route_table();
        let open: Vec<String> = t
            .routes()
            .iter()
            .filter(|d| {
                let path = d.path.replace("{id}", "x").replace("{*path}", "p");
                t.need(d.method, &path) == Need::Open
            })
            .map(|d| format!("{d:?}"))
            .collect();
        assert_eq!(
            open,
            [
                "GET /v1/agent/health",
                "GET /v1/status/leader",
                "GET /v1/status/peers",
                "GET /v1/regions",
                "GET /v1/metrics",
            ]
        );
        assert!(t.routes().len() > 80, "{} routes", t.routes().len());
    }
}
