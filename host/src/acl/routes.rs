//! The route table: for every route the API serves, the ACL [`Need`] it declared where it
//! is routed (`api/routes.rs` builds both the axum router and this table from one list).
//! The API's gate, the UI's "would this call pass" and the route-table test all read this
//! table; there is no second matcher to keep in step by hand.
//!
//! A path matches as axum matches it (the same `matchit` syntax: `{id}`, `{*rest}`); a
//! path or method no route serves needs nothing here: its 404 or 405 is answered whoever
//! asks.

use super::check::Need;

/// What a route's need is computed from: the method, the path's parameters and the query.
pub struct RouteArgs<'a> {
    /// `GET` (for `HEAD` too), `POST`, `PUT` or `DELETE`.
    pub method: &'a str,
    params: Vec<(&'a str, &'a str)>,
    query: &'a str,
}

impl RouteArgs<'_> {
    /// The path parameter `name` as given (not decoded), or empty.
    pub fn param(&self, name: &str) -> String {
        self.params
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
            .unwrap_or_default()
    }

    /// Whether the query has `key=value`.
    pub fn query_has(&self, key: &str, value: &str) -> bool {
        self.query
            .split('&')
            .any(|kv| kv.split_once('=') == Some((key, value)))
    }
}

/// How a route's need is computed.
pub type NeedFn = fn(&RouteArgs<'_>) -> Need;

/// One route and method, and what it needs.
#[derive(Clone, Copy)]
pub struct Declared {
    pub method: &'static str,
    /// Every method declared with it (`"POST PUT"`): one handler, one need.
    pub methods: &'static str,
    /// The path as routed (`/v1/job/{id}`).
    pub path: &'static str,
    pub need: NeedFn,
}

impl std::fmt::Debug for Declared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.method, self.path)
    }
}

/// Every route's need, and a matcher over their paths.
pub struct RouteTable {
    declared: Vec<Declared>,
    /// Path → the indexes in `declared` of its methods.
    matcher: matchit::Router<Vec<usize>>,
}

impl RouteTable {
    /// The table of `declared` routes.
    ///
    /// # Panics
    /// When a path is not one axum would route (the same declarations build the router,
    /// which refuses them first).
    pub fn new(declared: Vec<Declared>) -> Self {
        let mut by_path: std::collections::BTreeMap<&str, Vec<usize>> = Default::default();
        for (i, d) in declared.iter().enumerate() {
            by_path.entry(d.path).or_default().push(i);
        }
        let mut matcher = matchit::Router::new();
        for (path, ids) in by_path {
            matcher
                .insert(path, ids)
                .unwrap_or_else(|e| panic!("route {path}: {e}"));
        }
        Self { declared, matcher }
    }

    /// Every route and method served.
    pub fn routes(&self) -> &[Declared] {
        &self.declared
    }

    /// The route serving `method` on `path` (the path alone, no query), if one does.
    pub fn route(&self, method: &str, path: &str) -> Option<&Declared> {
        let method = if method == "HEAD" { "GET" } else { method };
        let m = self.matcher.at(path).ok()?;
        m.value
            .iter()
            .map(|i| &self.declared[*i])
            .find(|d| d.method == method)
    }

    /// What `method` on `target` (a path with its query, if any) needs.
    pub fn need(&self, method: &str, target: &str) -> Need {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let method = if method == "HEAD" { "GET" } else { method };
        let Ok(m) = self.matcher.at(path) else {
            return Need::Open;
        };
        let Some(d) = m
            .value
            .iter()
            .map(|i| &self.declared[*i])
            .find(|d| d.method == method)
        else {
            return Need::Open;
        };
        let args = RouteArgs {
            method,
            params: m.params.iter().collect(),
            query,
        };
        (d.need)(&args)
    }
}
