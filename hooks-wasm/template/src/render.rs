//! The template language: text with actions between delimiters (`{{` `}}` by default), a
//! small, exact subset of Go's text/template with the functions Nomad jobs use:
//!
//! - `{{ env "NAME" }}`: the task's environment variable (empty when unset, or an error
//!   with `error_on_missing_key`);
//! - `{{ with nomadVar "nomad/jobs/web" }}{{ .key }}{{ else }}...{{ end }}`: a Nomad
//!   Variable's items by key (`index . "a-key"` for keys that are not identifiers); a
//!   variable that does not exist is empty, so `else` runs;
//! - `{{ range $k, $v := nomadVar "path" }}{{ $k }}={{ $v }}{{ end }}`: its items in key
//!   order;
//! - `{{ range nomadVarList "prefix" }}{{ .Path }}{{ end }}`: the variables the task may
//!   read under a prefix (`Namespace`, `Path`, `CreateIndex`, `ModifyIndex`, `CreateTime`,
//!   `ModifyTime`), with `$i, $m :=` for the index;
//! - `{{- ... -}}`: trims the whitespace before / after the action;
//! - `{{/* comment */}}`: nothing.
//!
//! Anything else is an error that names the line and quotes the action, so a job never
//! renders half-understood; so is a variable the task may not read (the host's answer
//! names the path).

use std::collections::BTreeMap;

pub use super::parse::RenderError;
use super::parse::{Action, Expr, Node, Range};

/// A variable as `nomadVarList` lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VarMeta {
    pub namespace: String,
    pub path: String,
    pub create_index: u64,
    pub modify_index: u64,
    pub create_time: i64,
    pub modify_time: i64,
}

/// A service registration as `nomadService` lists it (Nomad's field names).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Service {
    pub id: String,
    pub service_name: String,
    pub namespace: String,
    pub node_id: String,
    pub datacenter: String,
    pub job_id: String,
    pub alloc_id: String,
    pub tags: Vec<String>,
    pub address: String,
    pub port: u16,
}

/// A service as `nomadServices` lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceStub {
    pub name: String,
    pub namespace: String,
    pub tags: Vec<String>,
}

/// Where a template's values come from (the host, in the hook).
pub trait Source {
    /// `env "NAME"`.
    fn env(&self, name: &str) -> Option<String>;
    /// `nomadVar "path"`: the items, `None` when there is no such variable; `Err` says why
    /// it cannot be read.
    fn var(&self, path: &str) -> Result<Option<BTreeMap<String, String>>, String>;
    /// `nomadVarList "prefix"`.
    fn var_list(&self, prefix: &str) -> Result<Vec<VarMeta>, String>;
    /// `nomadService`: registrations of `name` (with `tag`; `choose`'s count for its key).
    fn service(
        &self,
        name: &str,
        tag: Option<&str>,
        choose: Option<&(u32, String)>,
    ) -> Result<Vec<Service>, String>;
    /// `nomadServices`.
    fn services(&self) -> Result<Vec<ServiceStub>, String>;
    /// `file "path"`: a file of the task dir or the allocation's shared dir.
    fn file(&self, path: &str) -> Result<String, String>;
    /// The wall clock, ns since the Unix epoch (`timestamp`).
    fn now_ns(&self) -> i64;
}

/// A value while rendering.
#[derive(Debug, Clone)]
enum Value {
    /// No value: the top-level dot, a missing key, a variable that does not exist.
    Nothing,
    Str(String),
    /// A variable's items.
    Items(BTreeMap<String, String>),
    Meta(VarMeta),
    List(Vec<VarMeta>),
    Service(Service),
    Services(Vec<Service>),
    Stub(ServiceStub),
    Stubs(Vec<ServiceStub>),
    /// A list of strings (`.Tags`), printed as Go prints a slice: `[a b]`.
    Strs(Vec<String>),
    /// What `eq`, `not`, `contains`, … answer.
    Bool(bool),
}

impl Value {
    /// Go's truth: empty values are false.
    fn truthy(&self) -> bool {
        match self {
            Value::Nothing => false,
            Value::Str(s) => !s.is_empty(),
            Value::Items(m) => !m.is_empty(),
            Value::Meta(_) | Value::Service(_) | Value::Stub(_) => true,
            Value::List(l) => !l.is_empty(),
            Value::Services(l) => !l.is_empty(),
            Value::Stubs(l) => !l.is_empty(),
            Value::Strs(l) => !l.is_empty(),
            Value::Bool(b) => *b,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Value::Nothing => "nothing",
            Value::Str(_) => "a string",
            Value::Items(_) => "a variable's items",
            Value::Meta(_) => "a variable's metadata",
            Value::List(_) => "a list of variables",
            Value::Service(_) => "a service registration",
            Value::Services(_) => "a list of service registrations",
            Value::Stub(_) => "a service",
            Value::Stubs(_) => "a list of services",
            Value::Strs(_) => "a list of strings",
            Value::Bool(_) => "a boolean",
        }
    }
}

/// Render `text` with the given delimiters, values from `source`.
pub fn render(
    text: &str,
    left: &str,
    right: &str,
    err_missing_key: bool,
    source: &dyn Source,
) -> Result<String, RenderError> {
    let nodes = super::parse::parse(text, left, right)?;
    let mut eval = Eval {
        source,
        err_missing_key,
        vars: Vec::new(),
        steps: 0,
    };
    let mut out = String::with_capacity(text.len());
    eval.nodes(&nodes, &Value::Nothing, &mut out)?;
    Ok(out)
}

/// Actions and `range` iterations one render may take: nested ranges multiply, so a short
/// template could otherwise run for ever (fuzzing found ranges nested ten deep).
pub const MAX_STEPS: usize = 1_000_000;
/// The most text one render may produce.
pub const MAX_OUTPUT: usize = 16 << 20;

struct Eval<'a> {
    source: &'a dyn Source,
    err_missing_key: bool,
    /// Declared `$variables`, innermost last.
    vars: Vec<(String, Value)>,
    /// Actions and iterations so far.
    steps: usize,
}

impl Eval<'_> {
    /// Count one step at `a`; past the budget of steps or output, the render fails there.
    fn step(&mut self, a: &Action, out: &str) -> Result<(), RenderError> {
        self.steps += 1;
        if self.steps > MAX_STEPS || out.len() > MAX_OUTPUT {
            return Err(a.error(format!(
                "rendering takes more than {MAX_STEPS} steps or {} MiB at {:?} (do ranges nest too deep?)",
                MAX_OUTPUT >> 20,
                a.text
            )));
        }
        Ok(())
    }

    fn nodes(&mut self, nodes: &[Node], dot: &Value, out: &mut String) -> Result<(), RenderError> {
        for n in nodes {
            match n {
                Node::Text(t) => out.push_str(t),
                Node::Output(a, e) => {
                    self.step(a, out)?;
                    let v = self.expr(a, e, dot)?;
                    out.push_str(&print(a, v)?);
                }
                Node::With(a, e, body, otherwise) => {
                    self.step(a, out)?;
                    let v = self.expr(a, e, dot)?;
                    if v.truthy() {
                        self.nodes(body, &v, out)?;
                    } else {
                        self.nodes(otherwise, dot, out)?;
                    }
                }
                Node::If(a, e, body, otherwise) => {
                    self.step(a, out)?;
                    if self.expr(a, e, dot)?.truthy() {
                        self.nodes(body, dot, out)?;
                    } else {
                        self.nodes(otherwise, dot, out)?;
                    }
                }
                Node::Range(a, r, body, otherwise) => {
                    self.range(a, r, body, otherwise, dot, out)?
                }
            }
        }
        Ok(())
    }

    fn range(
        &mut self,
        a: &Action,
        r: &Range,
        body: &[Node],
        otherwise: &[Node],
        dot: &Value,
        out: &mut String,
    ) -> Result<(), RenderError> {
        let elems: Vec<(Value, Value)> = match self.expr(a, &r.expr, dot)? {
            Value::Nothing => Vec::new(),
            Value::Items(m) => m
                .into_iter()
                .map(|(k, v)| (Value::Str(k), Value::Str(v)))
                .collect(),
            Value::List(l) => indexed(l, Value::Meta),
            Value::Services(l) => indexed(l, Value::Service),
            Value::Stubs(l) => indexed(l, Value::Stub),
            Value::Strs(l) => indexed(l, Value::Str),
            v => return Err(a.error(format!("cannot range over {} in {:?}", v.kind(), a.text))),
        };
        if elems.is_empty() {
            return self.nodes(otherwise, dot, out);
        }
        for (key, elem) in elems {
            self.step(a, out)?;
            let scope = self.vars.len();
            if let Some(k) = &r.key {
                self.vars.push((k.clone(), key));
            }
            if let Some(v) = &r.value {
                self.vars.push((v.clone(), elem.clone()));
            }
            let done = self.nodes(body, &elem, out);
            self.vars.truncate(scope);
            done?;
        }
        Ok(())
    }

    fn expr(&mut self, a: &Action, e: &Expr, dot: &Value) -> Result<Value, RenderError> {
        Ok(match e {
            Expr::Env(name) => match self.source.env(name) {
                Some(v) => Value::Str(v),
                None if self.err_missing_key => {
                    return Err(a.error(format!("env {name:?} is not set")));
                }
                None => Value::Str(String::new()),
            },
            Expr::NomadVar(path) => match self.source.var(path) {
                Ok(Some(items)) => Value::Items(items),
                Ok(None) => Value::Nothing,
                Err(e) => return Err(a.error(format!("nomadVar {path:?}: {e}"))),
            },
            Expr::NomadVarList(prefix) => match self.source.var_list(prefix) {
                Ok(l) => Value::List(l),
                Err(e) => return Err(a.error(format!("nomadVarList {prefix:?}: {e}"))),
            },
            Expr::NomadService { name, tag, choose } => {
                let choose = match choose {
                    None => None,
                    Some((n, key)) => match self.expr(a, key, dot)? {
                        Value::Str(k) if !k.is_empty() => Some((*n, k)),
                        Value::Str(_) | Value::Nothing => {
                            return Err(a.error(format!(
                                "nomadService {name:?}: the key to choose by is empty in {:?}",
                                a.text
                            )));
                        }
                        v => {
                            return Err(a.error(format!(
                                "nomadService {name:?}: the key to choose by is {}, not a string, in {:?}",
                                v.kind(),
                                a.text
                            )));
                        }
                    },
                };
                match self.source.service(name, tag.as_deref(), choose.as_ref()) {
                    Ok(l) => Value::Services(l),
                    Err(e) => return Err(a.error(format!("nomadService {name:?}: {e}"))),
                }
            }
            Expr::NomadServices => match self.source.services() {
                Ok(l) => Value::Stubs(l),
                Err(e) => return Err(a.error(format!("nomadServices: {e}"))),
            },
            Expr::Index(term, key) => {
                let v = self.expr(a, term, dot)?;
                match v {
                    Value::Items(_) => self.field(a, v, key)?,
                    v => {
                        return Err(a.error(format!("cannot index {} in {:?}", v.kind(), a.text)));
                    }
                }
            }
            Expr::Dot(fields) => self.fields(a, dot.clone(), fields)?,
            Expr::Var(name, fields) => {
                let v = if name == "$" {
                    Value::Nothing
                } else {
                    self.vars
                        .iter()
                        .rev()
                        .find(|(n, _)| n == name)
                        .map(|(_, v)| v.clone())
                        .ok_or_else(|| {
                            a.error(format!("undefined variable {name} in {:?}", a.text))
                        })?
                };
                self.fields(a, v, fields)?
            }
            Expr::Str(s) => Value::Str(s.clone()),
            Expr::Call(name, args) => {
                let mut vals = Vec::with_capacity(args.len());
                for e in args {
                    vals.push(self.expr(a, e, dot)?);
                }
                self.call(a, name, vals)?
            }
        })
    }

    /// A function of [`super::parse::FUNCTIONS`] applied to its values.
    fn call(&mut self, a: &Action, name: &str, args: Vec<Value>) -> Result<Value, RenderError> {
        let text = |v: Value| -> Result<String, RenderError> {
            match v {
                Value::Nothing => Ok(String::new()),
                Value::Str(s) => Ok(s),
                v => Err(a.error(format!(
                    "{name} wants a string, found {} in {:?}",
                    v.kind(),
                    a.text
                ))),
            }
        };
        let n = args.len();
        let mut args = args.into_iter();
        let mut take = || args.next().unwrap_or(Value::Nothing);
        Ok(match name {
            "toJSON" => Value::Str(json(take()).to_string()),
            "toJSONPretty" => {
                Value::Str(serde_json::to_string_pretty(&json(take())).unwrap_or_default())
            }
            "split" => {
                let sep = text(take())?;
                let s = text(take())?;
                Value::Strs(if s.is_empty() {
                    Vec::new()
                } else {
                    s.split(sep.as_str()).map(str::to_string).collect()
                })
            }
            "join" => {
                let sep = text(take())?;
                match take() {
                    Value::Strs(l) => Value::Str(l.join(&sep)),
                    Value::Nothing => Value::Str(String::new()),
                    Value::Str(s) => Value::Str(s),
                    v => {
                        return Err(a.error(format!(
                            "join wants a list of strings, found {} in {:?}",
                            v.kind(),
                            a.text
                        )));
                    }
                }
            }
            "replaceAll" => {
                let (old, new, s) = (text(take())?, text(take())?, text(take())?);
                Value::Str(if old.is_empty() {
                    s
                } else {
                    s.replace(&old, &new)
                })
            }
            "toUpper" => Value::Str(text(take())?.to_uppercase()),
            "toLower" => Value::Str(text(take())?.to_lowercase()),
            "trimSpace" => Value::Str(text(take())?.trim().to_string()),
            "trimPrefix" => {
                let (p, s) = (text(take())?, text(take())?);
                Value::Str(s.strip_prefix(p.as_str()).map(str::to_string).unwrap_or(s))
            }
            "trimSuffix" => {
                let (p, s) = (text(take())?, text(take())?);
                Value::Str(s.strip_suffix(p.as_str()).map(str::to_string).unwrap_or(s))
            }
            "base64Encode" => Value::Str(base64_encode(text(take())?.as_bytes())),
            "base64Decode" => {
                let s = text(take())?;
                let bytes = base64_decode(&s)
                    .ok_or_else(|| a.error(format!("base64Decode: not base64 in {:?}", a.text)))?;
                Value::Str(String::from_utf8_lossy(&bytes).into_owned())
            }
            "file" => {
                let path = text(take())?;
                match self.source.file(&path) {
                    Ok(s) => Value::Str(s),
                    Err(e) => return Err(a.error(format!("file {path:?}: {e}"))),
                }
            }
            "timestamp" => {
                let layout = if n == 0 { None } else { Some(text(take())?) };
                Value::Str(timestamp(self.source.now_ns(), layout.as_deref()))
            }
            "printf" => {
                let format = text(take())?;
                let mut rest = (1..n).map(|_| take()).collect::<Vec<_>>().into_iter();
                let mut out = String::new();
                let mut chars = format.chars().peekable();
                while let Some(c) = chars.next() {
                    if c != '%' {
                        out.push(c);
                        continue;
                    }
                    match chars.next() {
                        Some('%') => out.push('%'),
                        Some('s' | 'v' | 'd') => match rest.next() {
                            Some(v) => out.push_str(&print(a, v)?),
                            None => out.push_str("%!v(MISSING)"),
                        },
                        Some('q') => match rest.next() {
                            Some(v) => out.push_str(&format!("{:?}", print(a, v)?)),
                            None => out.push_str("%!q(MISSING)"),
                        },
                        other => {
                            return Err(a.error(format!(
                                "printf: verb %{} is not one of %s %v %d %q %% in {:?}",
                                other.map(String::from).unwrap_or_default(),
                                a.text
                            )));
                        }
                    }
                }
                Value::Str(out)
            }
            "eq" => {
                let first = json(take());
                Value::Bool((1..n).any(|_| json(take()) == first))
            }
            "ne" => Value::Bool(json(take()) != json(take())),
            // Numbers as numbers when both are (a variable's items are text), else text.
            "lt" | "le" | "gt" | "ge" => {
                let (x, y) = (text(take())?, text(take())?);
                let order = match (x.trim().parse::<f64>(), y.trim().parse::<f64>()) {
                    (Ok(p), Ok(q)) => p.partial_cmp(&q).unwrap_or(std::cmp::Ordering::Equal),
                    _ => x.cmp(&y),
                };
                Value::Bool(match name {
                    "lt" => order.is_lt(),
                    "le" => order.is_le(),
                    "gt" => order.is_gt(),
                    _ => order.is_ge(),
                })
            }
            "not" => Value::Bool(!take().truthy()),
            // Go's: the first empty argument, else the last (`and`); the first non-empty,
            // else the last (`or`).
            "and" | "or" => {
                let want = name == "or";
                let mut last = Value::Nothing;
                for _ in 0..n {
                    last = take();
                    if last.truthy() == want {
                        break;
                    }
                }
                last
            }
            "contains" => {
                let needle = text(take())?;
                Value::Bool(match take() {
                    Value::Strs(l) => l.contains(&needle),
                    Value::Items(m) => m.contains_key(&needle),
                    Value::Str(s) => s.contains(&needle),
                    Value::Nothing => false,
                    v => {
                        return Err(a.error(format!(
                            "contains looks in a string, a list of strings or a variable's items, found {} in {:?}",
                            v.kind(),
                            a.text
                        )));
                    }
                })
            }
            "hasPrefix" => {
                let p = text(take())?;
                Value::Bool(text(take())?.starts_with(&p))
            }
            "hasSuffix" => {
                let p = text(take())?;
                Value::Bool(text(take())?.ends_with(&p))
            }
            _ => return Err(a.error(format!("unknown function {name:?} in {:?}", a.text))),
        })
    }

    fn fields(&self, a: &Action, mut v: Value, fields: &[String]) -> Result<Value, RenderError> {
        for f in fields {
            v = self.field(a, v, f)?;
        }
        Ok(v)
    }

    fn field(&self, a: &Action, v: Value, name: &str) -> Result<Value, RenderError> {
        Ok(match v {
            Value::Items(mut m) => match m.remove(name) {
                Some(s) => Value::Str(s),
                None if self.err_missing_key => {
                    return Err(a.error(format!(
                        "the variable has no key {name:?} (in {:?})",
                        a.text
                    )));
                }
                None => Value::Nothing,
            },
            Value::Meta(m) => match name {
                "Namespace" => Value::Str(m.namespace),
                "Path" => Value::Str(m.path),
                "CreateIndex" => Value::Str(m.create_index.to_string()),
                "ModifyIndex" => Value::Str(m.modify_index.to_string()),
                "CreateTime" => Value::Str(m.create_time.to_string()),
                "ModifyTime" => Value::Str(m.modify_time.to_string()),
                _ => {
                    return Err(a.error(format!(
                        "a variable's metadata has no field {name} (in {:?}; it has Namespace, Path, CreateIndex, ModifyIndex, CreateTime, ModifyTime)",
                        a.text
                    )));
                }
            },
            Value::Service(r) => match name {
                "ID" => Value::Str(r.id),
                "ServiceName" => Value::Str(r.service_name),
                "Namespace" => Value::Str(r.namespace),
                "NodeID" => Value::Str(r.node_id),
                "Datacenter" => Value::Str(r.datacenter),
                "JobID" => Value::Str(r.job_id),
                "AllocID" => Value::Str(r.alloc_id),
                "Tags" => Value::Strs(r.tags),
                "Address" => Value::Str(r.address),
                "Port" => Value::Str(r.port.to_string()),
                _ => {
                    return Err(a.error(format!(
                        "a service registration has no field {name} (in {:?}; it has ID, ServiceName, Namespace, NodeID, Datacenter, JobID, AllocID, Tags, Address, Port)",
                        a.text
                    )));
                }
            },
            Value::Stub(st) => match name {
                "Name" => Value::Str(st.name),
                "Namespace" => Value::Str(st.namespace),
                "Tags" => Value::Strs(st.tags),
                _ => {
                    return Err(a.error(format!(
                        "a service has no field {name} (in {:?}; it has Name, Namespace, Tags)",
                        a.text
                    )));
                }
            },
            v => {
                return Err(a.error(format!(
                    "cannot read field {name} of {} in {:?}",
                    v.kind(),
                    a.text
                )));
            }
        })
    }
}

/// A value as JSON, with Nomad's field names for registrations and variables' metadata.
fn json(v: Value) -> serde_json::Value {
    use serde_json::json;
    match v {
        Value::Nothing => serde_json::Value::Null,
        Value::Str(s) => s.into(),
        Value::Items(m) => json!(m),
        Value::Strs(l) => json!(l),
        Value::Bool(b) => b.into(),
        Value::Meta(m) => json!({ "Namespace": m.namespace, "Path": m.path,
            "CreateIndex": m.create_index, "ModifyIndex": m.modify_index,
            "CreateTime": m.create_time, "ModifyTime": m.modify_time }),
        Value::List(l) => {
            serde_json::Value::Array(l.into_iter().map(|m| json(Value::Meta(m))).collect())
        }
        Value::Service(r) => json!({ "ID": r.id, "ServiceName": r.service_name,
            "Namespace": r.namespace, "NodeID": r.node_id, "Datacenter": r.datacenter,
            "JobID": r.job_id, "AllocID": r.alloc_id, "Tags": r.tags,
            "Address": r.address, "Port": r.port }),
        Value::Services(l) => {
            serde_json::Value::Array(l.into_iter().map(|r| json(Value::Service(r))).collect())
        }
        Value::Stub(s) => json!({ "Name": s.name, "Namespace": s.namespace, "Tags": s.tags }),
        Value::Stubs(l) => {
            serde_json::Value::Array(l.into_iter().map(|s| json(Value::Stub(s))).collect())
        }
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Standard base64, padding optional; `None` for anything else.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let s = s.trim().trim_end_matches('=');
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut n, mut bits) = (0u32, 0);
    for c in s.bytes() {
        let v = B64.iter().position(|b| *b == c)? as u32;
        n = n << 6 | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((n >> bits & 0xff) as u8);
        }
    }
    Some(out)
}

/// `timestamp`: RFC 3339 in UTC by default (`2006-01-02T15:04:05Z`), `unix` for seconds,
/// else a Go layout of `2006`, `01`, `02`, `15`, `04`, `05` (other text kept as is).
fn timestamp(now_ns: i64, layout: Option<&str>) -> String {
    let secs = now_ns.div_euclid(1_000_000_000);
    if layout == Some("unix") {
        return secs.to_string();
    }
    let days = secs.div_euclid(86_400);
    let tod = secs.rem_euclid(86_400);
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let tokens = [
        ("2006", format!("{year:04}")),
        ("01", format!("{month:02}")),
        ("02", format!("{day:02}")),
        ("15", format!("{:02}", tod / 3600)),
        ("04", format!("{:02}", tod % 3600 / 60)),
        ("05", format!("{:02}", tod % 60)),
    ];
    // Left to right, each token once where it stands (a month of `02` is not a day).
    let mut rest = layout.unwrap_or("2006-01-02T15:04:05Z");
    let mut out = String::new();
    'scan: while !rest.is_empty() {
        for (token, value) in &tokens {
            if let Some(after) = rest.strip_prefix(token) {
                out.push_str(value);
                rest = after;
                continue 'scan;
            }
        }
        let c = rest.chars().next().unwrap_or_default();
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// A list's elements keyed by their index, as `range $i, $e := list` declares them.
fn indexed<T>(l: Vec<T>, wrap: fn(T) -> Value) -> Vec<(Value, Value)> {
    l.into_iter()
        .enumerate()
        .map(|(i, e)| (Value::Str(i.to_string()), wrap(e)))
        .collect()
}

/// What an output action writes.
fn print(a: &Action, v: Value) -> Result<String, RenderError> {
    match v {
        Value::Nothing => Ok(String::new()),
        Value::Str(s) => Ok(s),
        Value::Strs(l) => Ok(format!("[{}]", l.join(" "))),
        Value::Bool(b) => Ok(b.to_string()),
        v => Err(a.error(format!(
            "cannot print {} in {:?}: print its keys or fields (.key, .Path), or range over it",
            v.kind(),
            a.text
        ))),
    }
}

/// Parse an env template's output: `KEY=value` lines; blank lines and `#` comments are
/// skipped, `export ` is allowed, and a value may be quoted.
pub fn parse_env(text: &str) -> Result<Vec<(String, String)>, RenderError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((k, v)) = line.split_once('=') else {
            return Err(RenderError {
                line: i + 1,
                message: format!("expected KEY=value, found {raw:?}"),
            });
        };
        let key = k.trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(RenderError {
                line: i + 1,
                message: format!("invalid variable name {key:?}"),
            });
        }
        let v = v.trim();
        let value = ['"', '\'']
            .iter()
            .find_map(|q| v.strip_prefix(*q).and_then(|x| x.strip_suffix(*q)))
            .unwrap_or(v);
        out.push((key.to_string(), value.to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The task `t` of job `web`: two environment variables, and the variables it may
    /// read; `nomad/jobs/other` is another job's.
    struct Fake;

    impl Source for Fake {
        fn env(&self, name: &str) -> Option<String> {
            match name {
                "NOMAD_TASK_NAME" => Some("web".into()),
                "PORT" => Some("8080".into()),
                _ => None,
            }
        }

        fn var(&self, path: &str) -> Result<Option<BTreeMap<String, String>>, String> {
            match path {
                "nomad/jobs/web" => Ok(Some(
                    [
                        ("user", "admin"),
                        ("pass", "s3cret"),
                        ("db-host", "10.0.0.1"),
                    ]
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .into(),
                )),
                "nomad/jobs/other" => Err(format!(
                    "denied: Permission denied: may not read variable {path:?}"
                )),
                _ => Ok(None),
            }
        }

        fn var_list(&self, prefix: &str) -> Result<Vec<VarMeta>, String> {
            Ok(["nomad/jobs", "nomad/jobs/web"]
                .iter()
                .filter(|p| p.starts_with(prefix))
                .enumerate()
                .map(|(i, p)| VarMeta {
                    namespace: "default".into(),
                    path: p.to_string(),
                    create_index: 10 + i as u64,
                    modify_index: 20 + i as u64,
                    ..Default::default()
                })
                .collect())
        }

        fn service(
            &self,
            name: &str,
            tag: Option<&str>,
            choose: Option<&(u32, String)>,
        ) -> Result<Vec<Service>, String> {
            if name == "secret" {
                return Err("denied: component \"template\" has no `services` grant".into());
            }
            let mut all: Vec<Service> = [
                svc("a", "db", 5432, &["primary"]),
                svc("b", "db", 5433, &["replica", "v2"]),
                svc("c", "web", 8080, &[]),
            ]
            .into_iter()
            .filter(|s| s.service_name == name)
            .filter(|s| tag.is_none_or(|t| s.tags.iter().any(|x| x == t)))
            .collect();
            if let Some((n, _)) = choose {
                all.truncate(*n as usize);
            }
            Ok(all)
        }

        fn file(&self, path: &str) -> Result<String, String> {
            match path {
                "local/conf" => Ok("a=1\n".into()),
                _ => Err("No such file or directory".into()),
            }
        }

        fn now_ns(&self) -> i64 {
            1_700_000_000_123_000_000
        }

        fn services(&self) -> Result<Vec<ServiceStub>, String> {
            Ok(vec![
                ServiceStub {
                    name: "db".into(),
                    namespace: "default".into(),
                    tags: vec!["primary".into(), "replica".into(), "v2".into()],
                },
                ServiceStub {
                    name: "web".into(),
                    namespace: "default".into(),
                    tags: vec![],
                },
            ])
        }
    }

    fn svc(id: &str, name: &str, port: u16, tags: &[&str]) -> Service {
        Service {
            id: id.into(),
            service_name: name.into(),
            namespace: "default".into(),
            address: "10.0.0.9".into(),
            port,
            tags: tags.iter().map(|t| t.to_string()).collect(),
            ..Default::default()
        }
    }

    fn r(text: &str) -> Result<String, RenderError> {
        render(text, "{{", "}}", false, &Fake)
    }

    /// Found by fuzzing (`fuzz/corpus/template/nested-ranges`): ranges nested ten deep over
    /// three items each rendered 3^10 bodies and the hook hung; renders are bounded.
    #[test]
    fn nested_ranges_stop_at_the_step_budget() {
        let n = 40;
        let text = "{{ range nomadVar \"nomad/jobs/web\" }}x".repeat(n) + &"{{ end }}".repeat(n);
        let started = std::time::Instant::now();
        let e = render(&text, "{{", "}}", false, &Fake).unwrap_err();
        assert!(e.message.contains("steps"), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
    }

    #[test]
    fn renders_env_and_keeps_text() {
        assert_eq!(
            r("name={{ env \"NOMAD_TASK_NAME\" }}\nport={{env \"PORT\"}}\n").unwrap(),
            "name=web\nport=8080\n"
        );
        assert_eq!(r("no actions").unwrap(), "no actions");
    }

    #[test]
    fn missing_keys_are_empty_or_errors() {
        assert_eq!(r("[{{ env \"NOPE\" }}]").unwrap(), "[]");
        let e = render("a\n{{ env \"NOPE\" }}", "{{", "}}", true, &Fake).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("NOPE"), "{e}");
    }

    #[test]
    fn trims_comments_and_custom_delimiters() {
        assert_eq!(r("a  {{- env \"PORT\" -}}  b").unwrap(), "a8080b");
        assert_eq!(r("x{{/* note */}}y").unwrap(), "xy");
        assert_eq!(
            render("<< env \"PORT\" >> {{ literal }}", "<<", ">>", false, &Fake).unwrap(),
            "8080 {{ literal }}"
        );
    }

    #[test]
    fn unsupported_and_malformed_actions_are_errors() {
        let e = r("ok\n\n{{ key \"x\" }}").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.message.contains("unknown function \"key\""), "{e}");
        assert!(
            r("{{ env PORT }}")
                .unwrap_err()
                .message
                .contains("expected env")
        );
        assert!(
            r("{{ env \"PORT\" ")
                .unwrap_err()
                .message
                .contains("unclosed")
        );
    }

    #[test]
    fn env_files_parse() {
        let v = parse_env("# c\nA=1\nexport B = \"two words\"\n\nC='x'\n").unwrap();
        assert_eq!(
            v,
            vec![
                ("A".into(), "1".into()),
                ("B".into(), "two words".into()),
                ("C".into(), "x".into())
            ]
        );
        assert_eq!(parse_env("A=1\nnot a pair").unwrap_err().line, 2);
        assert!(parse_env("A-B=1").is_err());
    }

    #[test]
    fn nomad_var_items_by_key_with_an_else_for_a_missing_variable() {
        assert_eq!(
            r("{{ with nomadVar \"nomad/jobs/web\" }}{{ .user }}:{{ .pass }}@{{ index . \"db-host\" }}{{ end }}")
                .unwrap(),
            "admin:s3cret@10.0.0.1"
        );
        assert_eq!(
            r("{{ with nomadVar \"nomad/jobs/web/g\" }}{{ .user }}{{ else }}no var{{ end }}")
                .unwrap(),
            "no var"
        );
        // Inside `with`, env still works and a missing key is empty (or an error on demand).
        assert_eq!(
            r("{{ with nomadVar \"nomad/jobs/web\" }}{{ env \"PORT\" }}[{{ .nope }}]{{ end }}")
                .unwrap(),
            "8080[]"
        );
        let e = render(
            "{{ with nomadVar \"nomad/jobs/web\" }}{{ .nope }}{{ end }}",
            "{{",
            "}}",
            true,
            &Fake,
        )
        .unwrap_err();
        assert!(e.message.contains("no key \"nope\""), "{e}");
    }

    #[test]
    fn ranges_over_items_and_lists() {
        assert_eq!(
            r("{{ range $k, $v := nomadVar \"nomad/jobs/web\" }}{{ $k }}={{ $v }};{{ end }}")
                .unwrap(),
            "db-host=10.0.0.1;pass=s3cret;user=admin;"
        );
        assert_eq!(
            r("{{ range nomadVarList \"nomad/jobs\" }}{{ .Path }}@{{ .ModifyIndex }} {{ end }}")
                .unwrap(),
            "nomad/jobs@20 nomad/jobs/web@21 "
        );
        assert_eq!(
            r("{{ range $i, $m := nomadVarList }}\n{{ $i }}:{{ $m.Namespace }}/{{ $m.Path }}{{ end }}")
                .unwrap(),
            "\n0:default/nomad/jobs\n1:default/nomad/jobs/web"
        );
        assert_eq!(
            r("{{ range nomadVarList \"none/\" }}x{{ else }}empty{{ end }}").unwrap(),
            "empty"
        );
        // A range's variables end with it.
        let e = r("{{ range $v := nomadVarList }}{{ end }}{{ $v }}").unwrap_err();
        assert!(e.message.contains("undefined variable $v"), "{e}");
    }

    #[test]
    fn a_variable_the_task_may_not_read_fails_naming_the_path() {
        let e = r("ok\n{{ with nomadVar \"nomad/jobs/other\" }}{{ .x }}{{ end }}").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(
            e.message
                .starts_with("nomadVar \"nomad/jobs/other\": denied: Permission denied"),
            "{e}"
        );
    }

    #[test]
    fn values_that_cannot_be_printed_or_read_are_errors_quoting_the_action() {
        let e = r("{{ nomadVar \"nomad/jobs/web\" }}").unwrap_err();
        assert!(
            e.message
                .contains("cannot print a variable's items in \"nomadVar \\\"nomad/jobs/web\\\"\""),
            "{e}"
        );
        let e = r("{{ range nomadVarList }}{{ .Nope }}{{ end }}").unwrap_err();
        assert!(e.message.contains("no field Nope"), "{e}");
        let e = r("{{ range env \"PORT\" }}{{ end }}").unwrap_err();
        assert!(e.message.contains("cannot range over a string"), "{e}");
    }

    #[test]
    fn nomad_service_lists_registrations_with_tags_and_choice() {
        assert_eq!(
            r("{{ range nomadService \"db\" }}{{ .Address }}:{{ .Port }} {{ .Tags }};{{ end }}")
                .unwrap(),
            "10.0.0.9:5432 [primary];10.0.0.9:5433 [replica v2];"
        );
        assert_eq!(
            r("{{ range nomadService \"replica.db\" }}{{ .ID }}{{ end }}").unwrap(),
            "b"
        );
        assert_eq!(
            r("{{ range $i, $s := nomadService 1 \"k\" \"db\" }}{{ $i }}={{ $s.Port }}{{ end }}")
                .unwrap(),
            "0=5432"
        );
        assert_eq!(
            r("{{ range nomadService 1 (env \"NOMAD_TASK_NAME\") \"db\" }}{{ .Port }}{{ end }}")
                .unwrap(),
            "5432"
        );
        assert!(
            r("{{ range nomadService 1 (env \"NOPE\") \"db\" }}{{ end }}")
                .unwrap_err()
                .message
                .contains("the key to choose by is empty")
        );
        assert_eq!(
            r("{{ range nomadService \"nope\" }}x{{ else }}none{{ end }}").unwrap(),
            "none"
        );
        assert_eq!(
            r("{{ range nomadServices }}{{ .Name }}{{ range .Tags }} #{{ . }}{{ end }}\n{{ end }}")
                .unwrap(),
            "db #primary #replica #v2\nweb\n"
        );
        let e = r("{{ range nomadService \"db\" }}{{ .Nope }}{{ end }}").unwrap_err();
        assert!(e.message.contains("has no field Nope"), "{e}");
        let e = r("{{ range nomadService \"secret\" }}{{ end }}").unwrap_err();
        assert!(e.message.contains("`services` grant"), "{e}");
        for bad in [
            "{{ nomadService }}",
            "{{ nomadService 0 \"k\" \"db\" }}",
            "{{ nomadService \"a b\" }}",
            "{{ nomadServices \"x\" }}",
        ] {
            assert!(r(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn functions_and_pipelines() {
        assert_eq!(r("{{ env \"PORT\" | toJSON }}").unwrap(), "\"8080\"");
        assert_eq!(
            r("{{ with nomadVar \"nomad/jobs/web\" }}{{ toJSON . }}{{ end }}").unwrap(),
            r#"{"db-host":"10.0.0.1","pass":"s3cret","user":"admin"}"#
        );
        assert_eq!(
            r("{{ range split \",\" \"a,b,c\" }}[{{ . }}]{{ end }}").unwrap(),
            "[a][b][c]"
        );
        assert_eq!(r("{{ split \",\" \"a,b\" | join \"-\" }}").unwrap(), "a-b");
        assert_eq!(
            r("{{ \"a.b.c\" | replaceAll \".\" \"_\" | toUpper }}").unwrap(),
            "A_B_C"
        );
        assert_eq!(r("{{ toLower (env \"NOMAD_TASK_NAME\") }}").unwrap(), "web");
        assert_eq!(r("{{ \"  x \" | trimSpace }}").unwrap(), "x");
        assert_eq!(r("{{ trimPrefix \"v\" \"v1.2\" }}").unwrap(), "1.2");
        assert_eq!(r("{{ \"hello\" | base64Encode }}").unwrap(), "aGVsbG8=");
        assert_eq!(r("{{ \"aGVsbG8\" | base64Decode }}").unwrap(), "hello");
        assert_eq!(r("{{ file \"local/conf\" }}").unwrap(), "a=1\n");
        assert!(
            r("{{ file \"/etc/passwd\" }}")
                .unwrap_err()
                .message
                .contains("No such file")
        );
        assert_eq!(r("{{ timestamp }}").unwrap(), "2023-11-14T22:13:20Z");
        assert_eq!(r("{{ timestamp \"unix\" }}").unwrap(), "1700000000");
        assert_eq!(
            r("{{ timestamp \"02/01/2006 15h\" }}").unwrap(),
            "14/11/2023 22h"
        );
        assert_eq!(
            r("{{ printf \"%s:%d %q %%\" \"db\" \"5432\" \"x\" }}").unwrap(),
            "db:5432 \"x\" %"
        );
        assert_eq!(
            r("{{ range nomadService \"db\" }}{{ printf \"%s:%s,\" .Address .Port }}{{ end }}")
                .unwrap(),
            "10.0.0.9:5432,10.0.0.9:5433,"
        );
        assert_eq!(
            r("{{ range nomadService \"web\" }}{{ toJSON . }}{{ end }}").unwrap(),
            r#"{"Address":"10.0.0.9","AllocID":"","Datacenter":"","ID":"c","JobID":"","Namespace":"default","NodeID":"","Port":8080,"ServiceName":"web","Tags":[]}"#
        );
        // Numbers compare as numbers, other text as text.
        assert_eq!(
            r("{{ if lt \"9\" \"10\" }}num{{ end }} {{ if gt \"b\" \"a\" }}text{{ end }} {{ ge \"2\" \"2\" }} {{ le \"3\" \"2.5\" }}")
                .unwrap(),
            "num text true false"
        );
        // Errors name what is wrong.
        let e = r("{{ sprig_nope \"x\" }}").unwrap_err();
        assert!(
            e.message.contains("unknown function \"sprig_nope\"") && e.message.contains("toJSON"),
            "{e}"
        );
        let e = r("{{ \"x\" | nope }}").unwrap_err();
        assert!(
            e.message.contains("unknown function \"nope\" after |"),
            "{e}"
        );
        let e = r("{{ split \",\" }}").unwrap_err();
        assert!(
            e.message.contains("split takes 2 arguments, found 1"),
            "{e}"
        );
        assert!(r("{{ toUpper (env \"PORT\" }}").is_err());
        assert!(r("{{ join \",\" (nomadVar \"nomad/jobs/web\") }}").is_err());
    }

    #[test]
    fn if_else_if_and_comparisons() {
        let t = "{{ if eq (env \"PORT\") \"8080\" }}default{{ else if eq (env \"PORT\") \"80\" }}http{{ else }}other{{ end }}";
        assert_eq!(r(t).unwrap(), "default");
        assert_eq!(
            r("{{ if ne (env \"PORT\") \"80\" }}not 80{{ end }}|{{ if not (env \"NOPE\") }}unset{{ end }}")
                .unwrap(),
            "not 80|unset"
        );
        assert_eq!(
            r("{{ range nomadService \"db\" }}{{ if .Tags | contains \"primary\" }}{{ .Port }}{{ end }}{{ end }}")
                .unwrap(),
            "5432"
        );
        assert_eq!(
            r("{{ with nomadVar \"nomad/jobs/web\" }}{{ if and (contains \"user\" .) (hasPrefix \"adm\" .user) }}ok{{ end }}{{ end }}")
                .unwrap(),
            "ok"
        );
        assert_eq!(
            r("{{ or (env \"NOPE\") \"fallback\" }}").unwrap(),
            "fallback"
        );
        assert_eq!(r("{{ eq \"a\" \"b\" \"a\" }}").unwrap(), "true");
        assert_eq!(
            r("{{ if hasSuffix \".com\" \"x.org\" }}y{{ else }}n{{ end }}").unwrap(),
            "n"
        );
        // An else-if chain nests one `if` per link; one `end` closes it.
        assert_eq!(
            r("{{ if eq \"a\" \"b\" }}1{{ else if eq \"a\" \"c\" }}2{{ else if eq \"a\" \"a\" }}3{{ end }}")
                .unwrap(),
            "3"
        );
        assert!(
            r("{{ with env \"PORT\" }}{{ else if eq . \"x\" }}{{ end }}")
                .unwrap_err()
                .message
                .contains("belongs to an {{if}}")
        );
        assert!(r("{{ if eq \"a\" \"a\" }}x{{ else }}y{{ else }}z{{ end }}").is_err());
        assert!(
            r("{{ if eq \"a\" }}x{{ end }}")
                .unwrap_err()
                .message
                .contains("eq takes 2")
        );
    }
}
