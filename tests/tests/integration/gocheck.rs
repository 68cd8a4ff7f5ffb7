//! The checker behind the `gotypes` test: it calls an endpoint as Nomad's Go client does,
//! checks what the client checks before decoding (status 200, `requireOK`; the
//! `X-Nomad-Index` header as a uint64, and `X-Nomad-LastContact` on reads,
//! `parseQueryMeta` / `parseWriteMeta`), and decodes the answer into the Go-typed mirror
//! (`paddock_tests::gotypes`) with Go's rules. Every mismatch is recorded, not only the
//! first: the offending value is blanked (Go takes `null` anywhere) or, for a field that
//! must be there, filled with a zero of the right kind, and the answer decoded again.
//!
//! It also records which routes (method and path template) were called with success, so
//! the test can compare them with every route the API's routers declare
//! ([`served_routes`]).

use std::collections::BTreeSet;

use paddock_tests::gotypes::{GoValue, NEVER_NIL};
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_path_to_error::Segment;

use crate::harness::TestAgent;

/// A request: method, the route's path template, its arguments in order, a query string.
pub struct Req<'a> {
    pub method: &'static str,
    pub template: &'static str,
    pub args: Vec<String>,
    pub query: &'a str,
    pub body: Option<Value>,
    /// The status the route answers with this request (200 unless it is one that is
    /// meant to fail, as a deployment that cannot exist).
    pub expect: u16,
}

/// `Req` for `method` on `template`.
pub fn req(method: &'static str, template: &'static str) -> Req<'static> {
    Req {
        method,
        template,
        args: Vec::new(),
        query: "",
        body: None,
        expect: 200,
    }
}

impl<'a> Req<'a> {
    /// The next `{...}` of the template; a `/` in it is escaped, as Go's client
    /// `url.PathEscape`s ids (a periodic or dispatched child's id holds one).
    pub fn arg(mut self, a: &str) -> Self {
        self.args.push(a.replace('/', "%2F"));
        self
    }
    /// The next `{...}` as given, `/` and all (a variable's path, which Go's client puts
    /// in the URL as it is).
    pub fn raw_arg(mut self, a: &str) -> Self {
        self.args.push(a.to_string());
        self
    }
    /// The status this request must get instead of 200 (the route still counts as
    /// checked).
    pub fn expect(mut self, status: u16) -> Self {
        self.expect = status;
        self
    }
    /// A query string (without `?`).
    pub fn query(self, q: &'a str) -> Req<'a> {
        Req { query: q, ..self }
    }
    /// A JSON body.
    pub fn body(mut self, b: Value) -> Self {
        self.body = Some(b);
        self
    }

    fn path(&self) -> String {
        let mut out = String::new();
        let mut args = self.args.iter();
        let mut rest = self.template;
        while let Some(open) = rest.find('{') {
            let close = rest[open..].find('}').expect("a template's { is closed") + open;
            out.push_str(&rest[..open]);
            out.push_str(args.next().expect("an argument for every {...}"));
            rest = &rest[close + 1..];
        }
        out.push_str(rest);
        if !self.query.is_empty() {
            out.push('?');
            out.push_str(self.query);
        }
        out
    }
}

/// Which of Go's metadata headers the client parses from the answer.
#[derive(Clone, Copy, PartialEq)]
enum Meta {
    /// `query`: `X-Nomad-Index`, `X-Nomad-LastContact`.
    Query,
    /// `put` / `delete`: `X-Nomad-Index`.
    Write,
    /// A raw read (`rawQuery`, streams): none.
    Raw,
}

/// Decode checks against one agent.
pub struct GoCheck<'t> {
    t: &'t TestAgent,
    /// One line per mismatch: `METHOD path: Type.field: Go type: why; sent value`.
    pub failures: Vec<String>,
    /// Routes answered 200, as (method, template).
    pub covered: BTreeSet<(String, String)>,
    /// Sent as `X-Nomad-Token` with every request, when set.
    pub token: Option<String>,
}

impl<'t> GoCheck<'t> {
    /// The agent under check.
    pub fn agent(&self) -> &'t TestAgent {
        self.t
    }

    /// The agent's address, `http://host:port`.
    pub fn base(&self) -> String {
        self.t.url("")
    }

    pub fn new(t: &'t TestAgent) -> Self {
        Self {
            t,
            failures: Vec::new(),
            covered: BTreeSet::new(),
            token: None,
        }
    }

    /// Record a mismatch found outside decoding (a value Go decodes but that is wrong).
    pub fn fail(&mut self, line: String) {
        self.failures.push(line);
    }

    /// Call `r`; on a 200 with the headers Go needs, decode its JSON as the Go type `T`
    /// mirrors. Returns the decoded value and the raw JSON.
    pub async fn json<T: DeserializeOwned>(&mut self, r: Req<'_>) -> Option<(T, Value)> {
        let meta = if r.method == "GET" {
            Meta::Query
        } else {
            Meta::Write
        };
        let (what, bytes) = self.send(&r, meta).await?;
        let v: Value = match serde_json::from_slice(&bytes) {
            Ok(v) => v,
            Err(e) => {
                self.fail(format!("{what}: {}: not JSON: {e}", go_name::<T>()));
                return None;
            }
        };
        let t = self.decode(&what, &v)?;
        Some((t, v))
    }

    /// Call a route Nomad answers with no body at all (its handler returns a nil object,
    /// as the client GC's does): a 200 with `X-Nomad-Index` and an empty body.
    pub async fn empty(&mut self, r: Req<'_>) {
        if let Some((what, body)) = self.send(&r, Meta::Write).await
            && !body.is_empty()
        {
            self.fail(format!(
                "{what}: Nomad answers no body, got {}",
                short(&String::from_utf8_lossy(&body))
            ));
        }
    }

    /// Call a write whose answer Go does not decode (`put(..., nil, nil, q)`): only its
    /// status and `X-Nomad-Index` count.
    pub async fn write(&mut self, r: Req<'_>) -> Option<Vec<u8>> {
        self.send(&r, Meta::Write).await.map(|(_, b)| b)
    }

    /// Call a route that must answer `r.expect` (not 200): a route that exists, answering
    /// what Nomad answers to this request.
    pub async fn status(&mut self, r: Req<'_>) {
        let what = format!("{} {}", r.method, r.path());
        let method = reqwest::Method::from_bytes(r.method.as_bytes()).unwrap();
        let mut rb = self.t.http.request(method, self.t.url(&r.path()));
        if let Some(t) = &self.token {
            rb = rb.header("X-Nomad-Token", t);
        }
        if let Some(b) = &r.body {
            rb = rb.json(b);
        }
        match rb.send().await {
            Ok(resp) if resp.status().as_u16() == r.expect => {
                self.covered
                    .insert((r.method.to_string(), r.template.to_string()));
            }
            Ok(resp) => self.fail(format!(
                "{what}: HTTP {}, but Nomad answers {}",
                resp.status(),
                r.expect
            )),
            Err(e) => self.fail(format!("{what}: {e}")),
        }
    }

    /// Call a raw endpoint (a file's bytes, a stream); returns the body of a 200.
    pub async fn raw(&mut self, r: Req<'_>) -> Option<Vec<u8>> {
        self.send(&r, Meta::Raw).await.map(|(_, b)| b)
    }

    /// Open a stream (the event stream): the response of a 200, its body unread.
    pub async fn stream(&mut self, r: Req<'_>) -> Option<reqwest::Response> {
        let what = format!("{} {}", r.method, r.path());
        let resp = self.t.http.get(self.t.url(&r.path())).send().await;
        match resp {
            Ok(resp) if resp.status() == 200 => {
                self.covered
                    .insert((r.method.to_string(), r.template.to_string()));
                Some(resp)
            }
            Ok(resp) => {
                self.fail(format!("{what}: HTTP {}", resp.status()));
                None
            }
            Err(e) => {
                self.fail(format!("{what}: {e}"));
                None
            }
        }
    }

    async fn send(&mut self, r: &Req<'_>, meta: Meta) -> Option<(String, Vec<u8>)> {
        let path = r.path();
        let what = format!("{} {path}", r.method);
        let method = reqwest::Method::from_bytes(r.method.as_bytes()).unwrap();
        let mut rb = self.t.http.request(method, self.t.url(&path));
        if let Some(t) = &self.token {
            rb = rb.header("X-Nomad-Token", t);
        }
        if let Some(b) = &r.body {
            rb = rb.json(b);
        }
        let resp = match rb.send().await {
            Ok(resp) => resp,
            Err(e) => {
                self.fail(format!("{what}: {e}"));
                return None;
            }
        };
        let status = resp.status();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let mut need = Vec::new();
        if meta != Meta::Raw {
            need.push(("X-Nomad-Index", header("X-Nomad-Index")));
        }
        if meta == Meta::Query {
            need.push(("X-Nomad-LastContact", header("X-Nomad-LastContact")));
        }
        let body = resp.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
        if status != r.expect {
            // `requireOK`: anything else is an error to a Go client.
            let text = String::from_utf8_lossy(&body);
            self.fail(format!("{what}: HTTP {status}: {}", short(&text)));
            return None;
        }
        for (name, v) in need {
            if v.as_deref().and_then(|v| v.parse::<u64>().ok()).is_none() {
                self.fail(format!(
                    "{what}: header {name}: Go parses a uint64, got {v:?}"
                ));
            }
        }
        self.covered
            .insert((r.method.to_string(), r.template.to_string()));
        Some((what, body))
    }

    /// Decode `v` as the Go type `T` mirrors, recording every mismatch.
    pub fn decode<T: DeserializeOwned>(&mut self, what: &str, v: &Value) -> Option<T> {
        let type_name = go_name::<T>();
        let mut v = v.clone();
        for _ in 0..500 {
            let err = match serde_path_to_error::deserialize::<_, T>(GoValue(&v)) {
                Ok(t) => return Some(t),
                Err(e) => e,
            };
            let segs: Vec<Segment> = err.path().iter().cloned().collect();
            let path = err.path().to_string();
            let msg = err.into_inner().to_string();
            let field = if path == "." {
                String::new()
            } else if path.starts_with('[') {
                path.clone()
            } else {
                format!(".{path}")
            };
            let sent = match slot(&mut v, &segs) {
                Some(x) => short(&x.to_string()),
                None => "nothing".into(),
            };
            self.fail(format!(
                "{what}: {type_name}{field}: Go {}: {msg}; sent {sent}",
                go_type(&msg)
            ));
            if !repair::<T>(&mut v, &segs, &path) {
                return None;
            }
        }
        None
    }
}

/// Make the value at `segs` decode past this error: blank it (Go's zero), or, if it
/// already is absent or `null` (a field that must be there), put a zero of some kind in
/// its place. False when nothing works.
fn repair<T: DeserializeOwned>(v: &mut Value, segs: &[Segment], path: &str) -> bool {
    if let Some(x) = slot(v, segs)
        && !x.is_null()
    {
        *x = Value::Null;
        return true;
    }
    let zeros = [
        serde_json::json!(0),
        serde_json::json!(""),
        serde_json::json!(false),
        serde_json::json!({}),
        serde_json::json!([]),
        serde_json::json!("0001-01-01T00:00:00Z"),
    ];
    for z in zeros {
        let mut tried = v.clone();
        if !put(&mut tried, segs, z) {
            return false;
        }
        let moved_on = match serde_path_to_error::deserialize::<_, T>(GoValue(&tried)) {
            Ok(_) => true,
            Err(e) => e.path().to_string() != path,
        };
        if moved_on {
            *v = tried;
            return true;
        }
    }
    false
}

/// The value at `segs`, keys matched ignoring case as Go matches them.
fn slot<'v>(mut v: &'v mut Value, segs: &[Segment]) -> Option<&'v mut Value> {
    for seg in segs {
        v = match seg {
            Segment::Seq { index } => v.as_array_mut()?.get_mut(*index)?,
            Segment::Map { key } => {
                let m = v.as_object_mut()?;
                let k = m.keys().find(|k| k.eq_ignore_ascii_case(key))?.clone();
                m.get_mut(&k)?
            }
            _ => return None,
        };
    }
    Some(v)
}

/// Set the value at `segs`, adding the last key to its object if it is not there.
fn put(v: &mut Value, segs: &[Segment], x: Value) -> bool {
    let Some((last, parent)) = segs.split_last() else {
        return false;
    };
    match (slot(v, parent), last) {
        (Some(Value::Object(m)), Segment::Map { key }) => {
            let k = m
                .keys()
                .find(|k| k.eq_ignore_ascii_case(key))
                .cloned()
                .unwrap_or_else(|| key.clone());
            m.insert(k, x);
            true
        }
        (Some(Value::Array(a)), Segment::Seq { index }) if *index < a.len() => {
            a[*index] = x;
            true
        }
        _ => false,
    }
}

/// The Go name of the type `T` mirrors: `Vec<Option<AllocFileInfo>>` is
/// `[]*AllocFileInfo`.
fn go_name<T>() -> String {
    fn go(rust: &str) -> String {
        let last = |s: &str| s.rsplit("::").next().unwrap_or(s).to_string();
        let inner = |prefix: &str| {
            rust.strip_prefix(prefix)
                .and_then(|r| r.strip_suffix('>'))
                .map(str::to_string)
        };
        if let Some(i) = inner("alloc::vec::Vec<") {
            return format!("[]{}", go(&i));
        }
        if let Some(i) = inner("core::option::Option<") {
            return format!("*{}", go(&i));
        }
        match last(rust).as_str() {
            "String" => "string".into(),
            "EmptyResponse" => "struct{}".into(),
            "GenericResponse" => "structs.GenericResponse".into(),
            "PeriodicForceResponse" => "periodicForceResponse".into(),
            "EventPayload" => "Event.Payload".into(),
            "Value" => "(Paddock's own, any JSON)".into(),
            other => other.into(),
        }
    }
    go(std::any::type_name::<T>())
}

/// The Go type a decode error expected, from serde's wording of it.
fn go_type(msg: &str) -> String {
    if msg.contains(NEVER_NIL) {
        return "non-nil field".into();
    }
    let expected = msg.rsplit_once("expected ").map_or("", |(_, e)| e.trim());
    // The scalars of `gotypes` name their Go type: "... (Go time.Time)".
    if let Some(go) = expected
        .rsplit_once("(Go ")
        .and_then(|(_, g)| g.strip_suffix(')'))
    {
        return go.to_string();
    }
    match expected {
        "u64" => "uint64",
        "u32" => "uint32",
        "u16" => "uint16",
        "u8" => "uint8",
        "i64" => "int64 (int, time.Duration)",
        "i32" => "int32",
        "i8" => "int8",
        "f64" => "float64",
        "a string" => "string",
        "a boolean" => "bool",
        "a sequence" => "slice",
        "a map" => "map",
        "" => "value",
        other => other,
    }
    .to_string()
}

fn short(s: &str) -> String {
    let s = s.trim();
    if s.chars().count() > 160 {
        format!("{}...", s.chars().take(160).collect::<String>())
    } else {
        s.to_string()
    }
}

/// Every route the API serves, as (method, path template): the API's own route table,
/// built from the same declarations as its router.
pub fn served_routes() -> BTreeSet<(String, String)> {
    paddock::api::route_table()
        .routes()
        .iter()
        .map(|d| (d.method.to_string(), d.path.to_string()))
        .collect()
}
