//! Nomad HCL job files into the typed model. The HCL is read with `hcl-edit` (which keeps
//! source spans), turned into the Nomad API JSON shape, and checked by the same code as API
//! jobs; an error is reported with the HCL path (`job.group[0].task[1].resources.memory`)
//! and the line it is on.
//!
//! Runtime interpolations (`${NOMAD_*}`, `${attr.*}`, `${node.*}`, `${meta.*}`) are kept as
//! written, for the client to resolve, as Nomad's jobspec2 does. `variable` blocks (with
//! `-var` values over their defaults) and `locals` are resolved here, as attribute values
//! (`count = var.n`) and inside strings (`"${var.region}-web"`); HCL functions and operators
//! are not supported yet: such an expression is an error naming its place.

use std::collections::BTreeMap;
use std::ops::Range;

use hcl::edit::Span;
use hcl::edit::expr::{Expression, ObjectKey, TraversalOperator};
use hcl::edit::structure::{Block, BlockLabel, Body, Structure};
use serde_json::{Map, Value};

use super::{Job, JobspecError};

type R<T> = Result<T, JobspecError>;

/// Blocks and attributes of a cluster scheduler that a single node accepts and ignores.
const IGNORED: &[&str] = &[
    "constraint",
    "affinity",
    "spread",
    "update",
    "migrate",
    "reschedule",
    "network",
    "service",
    "vault",
    "consul",
    "artifact",
    "volume",
    "volume_mount",
    "scaling",
    "identity",
    "dispatch_payload",
    "csi_plugin",
    "periodic",
    "parameterized",
    "multiregion",
    "ui",
    "all_at_once",
    "node_pool",
    "disconnect",
    "max_client_disconnect",
    "stop_after_client_disconnect",
    "prevent_reschedule_on_lost",
    "max_run_duration",
    "secret",
    "schedule",
    "action",
    "kind",
];

/// A block of plain attributes: HCL name, Nomad JSON key, attribute renames.
struct BlockSpec {
    hcl: &'static str,
    json: &'static str,
    fields: &'static [(&'static str, &'static str)],
}

const RESTART: BlockSpec = BlockSpec {
    hcl: "restart",
    json: "RestartPolicy",
    fields: &[
        ("attempts", "Attempts"),
        ("interval", "Interval"),
        ("delay", "Delay"),
        ("mode", "Mode"),
        ("render_templates", "RenderTemplates"),
    ],
};

/// Plain blocks inside a `group`.
const GROUP_BLOCKS: &[BlockSpec] = &[
    RESTART,
    BlockSpec {
        hcl: "ephemeral_disk",
        json: "EphemeralDisk",
        fields: &[
            ("size", "SizeMB"),
            ("sticky", "Sticky"),
            ("migrate", "Migrate"),
        ],
    },
];

/// Plain blocks inside a `task`.
const TASK_BLOCKS: &[BlockSpec] = &[
    RESTART,
    BlockSpec {
        hcl: "logs",
        json: "LogConfig",
        fields: &[
            ("max_files", "MaxFiles"),
            ("max_file_size", "MaxFileSizeMB"),
            ("disabled", "Disabled"),
        ],
    },
    BlockSpec {
        hcl: "lifecycle",
        json: "Lifecycle",
        fields: &[("hook", "Hook"), ("sidecar", "Sidecar")],
    },
];

/// A `template` block's attributes (blocks `wait` and `change_script` are ignored).
const TEMPLATE_FIELDS: &[(&str, &str)] = &[
    ("source", "SourcePath"),
    ("destination", "DestPath"),
    ("data", "EmbeddedTmpl"),
    ("change_mode", "ChangeMode"),
    ("change_signal", "ChangeSignal"),
    ("perms", "Perms"),
    ("left_delimiter", "LeftDelim"),
    ("right_delimiter", "RightDelim"),
    ("env", "Envvars"),
    ("error_on_missing_key", "ErrMissingKey"),
    ("splay", "Splay"),
    ("uid", "Uid"),
    ("gid", "Gid"),
    ("once", "Once"),
];

fn spec<'a>(specs: &'a [BlockSpec], b: &Block) -> Option<&'a BlockSpec> {
    specs.iter().find(|s| s.hcl == b.ident.as_str())
}

/// One HCL place: its HCL path and byte span, by the JSON path it became.
struct Place {
    json: String,
    hcl: String,
    span: Option<Range<usize>>,
}

struct Conv<'a> {
    src: &'a str,
    places: Vec<Place>,
    /// `var.*` and `local.*` values by their full name (`var.region`).
    values: BTreeMap<String, Value>,
}

/// Parse a Nomad HCL job file.
pub fn parse_job_hcl(src: &str) -> R<Job> {
    parse_job_hcl_with_vars(src, &BTreeMap::new())
}

/// Parse a Nomad HCL job file with variable values (`-var name=value`), which override the
/// `variable` blocks' defaults. A value is read as HCL when it parses as a literal (`3`,
/// `true`, `["a"]`) and as a string otherwise, as Nomad's `-var` does.
pub fn parse_job_hcl_with_vars(src: &str, vars: &BTreeMap<String, String>) -> R<Job> {
    let body = hcl::edit::parser::parse_body(src)
        .map_err(|e| JobspecError::new("job", format!("invalid HCL: {e}")))?;
    let mut conv = Conv {
        src,
        places: Vec::new(),
        values: BTreeMap::new(),
    };
    conv.variables(&body, vars)?;
    let jobs: Vec<&Block> = body
        .iter()
        .filter_map(|s| s.as_block())
        .filter(|b| b.ident.as_str() == "job")
        .collect();
    let job = match jobs.as_slice() {
        [one] => *one,
        [] => {
            return Err(JobspecError::new(
                "job",
                "the file has no `job \"<id>\" { ... }` block",
            ));
        }
        [_, second, ..] => return Err(conv.err_at("job", second.span(), "only one job per file")),
    };
    let value = conv.job(job)?;
    super::json::job_from_value(&value).map_err(|e| conv.translate(e))
}

fn line_of(src: &str, offset: usize) -> usize {
    src[..offset.min(src.len())]
        .bytes()
        .filter(|b| *b == b'\n')
        .count()
        + 1
}

fn label(b: &Block) -> Option<String> {
    b.labels.first().map(|l| match l {
        BlockLabel::String(s) => s.value().to_string(),
        BlockLabel::Ident(i) => i.as_str().to_string(),
    })
}

impl Conv<'_> {
    fn err_at(
        &self,
        hcl: &str,
        span: Option<Range<usize>>,
        msg: impl Into<String>,
    ) -> JobspecError {
        let path = match span {
            Some(s) => format!("{hcl} (line {})", line_of(self.src, s.start)),
            None => hcl.to_string(),
        };
        JobspecError::new(path, msg)
    }

    fn place(&mut self, json: String, hcl: String, span: Option<Range<usize>>) {
        self.places.push(Place { json, hcl, span });
    }

    /// Turn a JSON-layer error back into the HCL path and line of the field.
    fn translate(&self, e: JobspecError) -> JobspecError {
        if let Some(p) = self.places.iter().find(|p| p.json == e.path) {
            return self.err_at(&p.hcl, p.span.clone(), e.message);
        }
        // A missing field: name it under its nearest recorded parent.
        let mut parent = e.path.as_str();
        while let Some((head, _)) = parent.rsplit_once('.') {
            if let Some(p) = self.places.iter().find(|p| p.json == head) {
                let leaf = hcl_name(&e.path[head.len() + 1..]);
                return self.err_at(&format!("{}.{leaf}", p.hcl), p.span.clone(), e.message);
            }
            parent = head;
        }
        e
    }

    fn job(&mut self, b: &Block) -> R<Value> {
        let mut out = Map::new();
        let id = label(b).ok_or_else(|| {
            self.err_at("job", b.span(), "the job block needs a label: job \"<id>\"")
        })?;
        out.insert("ID".into(), Value::String(id));
        self.place("Job".into(), "job".into(), b.span());
        let mut groups = Vec::new();
        for item in b.body.iter() {
            match item {
                Structure::Block(g) if g.ident.as_str() == "group" => {
                    let i = groups.len();
                    groups.push(self.group(g, i)?);
                }
                other => self.common(
                    other,
                    "job",
                    "Job",
                    &mut out,
                    &[
                        ("name", "Name"),
                        ("type", "Type"),
                        ("priority", "Priority"),
                        ("namespace", "Namespace"),
                        ("region", "Region"),
                        ("datacenters", "Datacenters"),
                        ("meta", "Meta"),
                    ],
                )?,
            }
        }
        out.insert("TaskGroups".into(), Value::Array(groups));
        Ok(Value::Object(out))
    }

    fn group(&mut self, b: &Block, i: usize) -> R<Value> {
        let (hcl, json) = (format!("job.group[{i}]"), format!("Job.TaskGroups[{i}]"));
        let mut out = Map::new();
        let name = label(b).ok_or_else(|| {
            self.err_at(
                &hcl,
                b.span(),
                "a group block needs a label: group \"<name>\"",
            )
        })?;
        out.insert("Name".into(), Value::String(name));
        self.place(json.clone(), hcl.clone(), b.span());
        let mut tasks = Vec::new();
        for item in b.body.iter() {
            match item {
                Structure::Block(t) if t.ident.as_str() == "task" => {
                    let j = tasks.len();
                    tasks.push(self.task(t, i, j)?);
                }
                Structure::Block(x) if spec(GROUP_BLOCKS, x).is_some() => {
                    self.plain(GROUP_BLOCKS, x, &hcl, &json, &mut out)?
                }
                Structure::Block(n) if n.ident.as_str() == "network" => {
                    let v =
                        self.network(n, &format!("{hcl}.network"), &format!("{json}.Networks[0]"))?;
                    match out.get_mut("Networks") {
                        Some(Value::Array(a)) => a.push(v),
                        _ => {
                            out.insert("Networks".into(), Value::Array(vec![v]));
                        }
                    }
                }
                other => self.common(
                    other,
                    &hcl,
                    &json,
                    &mut out,
                    &[
                        ("count", "Count"),
                        ("meta", "Meta"),
                        ("shutdown_delay", "ShutdownDelay"),
                    ],
                )?,
            }
        }
        out.insert("Tasks".into(), Value::Array(tasks));
        Ok(Value::Object(out))
    }

    fn task(&mut self, b: &Block, g: usize, t: usize) -> R<Value> {
        let (hcl, json) = (
            format!("job.group[{g}].task[{t}]"),
            format!("Job.TaskGroups[{g}].Tasks[{t}]"),
        );
        let mut out = Map::new();
        let name = label(b).ok_or_else(|| {
            self.err_at(
                &hcl,
                b.span(),
                "a task block needs a label: task \"<name>\"",
            )
        })?;
        out.insert("Name".into(), Value::String(name));
        self.place(json.clone(), hcl.clone(), b.span());
        let mut templates = Vec::new();
        for item in b.body.iter() {
            match item {
                Structure::Block(x) if x.ident.as_str() == "template" => {
                    let i = templates.len();
                    templates.push(self.simple_block(
                        x,
                        &format!("{hcl}.template[{i}]"),
                        &format!("{json}.Templates[{i}]"),
                        TEMPLATE_FIELDS,
                        &["wait", "change_script"],
                    )?);
                }
                Structure::Block(c) if c.ident.as_str() == "config" => {
                    self.place(format!("{json}.Config"), format!("{hcl}.config"), c.span());
                    out.insert(
                        "Config".into(),
                        self.body_value(&c.body, &format!("{hcl}.config"))?,
                    );
                }
                Structure::Block(r) if r.ident.as_str() == "resources" => {
                    let v = self.resources(
                        r,
                        &format!("{hcl}.resources"),
                        &format!("{json}.Resources"),
                    )?;
                    out.insert("Resources".into(), v);
                }
                Structure::Block(x) if spec(TASK_BLOCKS, x).is_some() => {
                    self.plain(TASK_BLOCKS, x, &hcl, &json, &mut out)?
                }
                other => self.common(
                    other,
                    &hcl,
                    &json,
                    &mut out,
                    &[
                        ("driver", "Driver"),
                        ("user", "User"),
                        ("env", "Env"),
                        ("meta", "Meta"),
                        ("kill_timeout", "KillTimeout"),
                        ("kill_signal", "KillSignal"),
                        ("leader", "Leader"),
                        ("shutdown_delay", "ShutdownDelay"),
                    ],
                )?,
            }
        }
        if !templates.is_empty() {
            out.insert("Templates".into(), Value::Array(templates));
        }
        Ok(Value::Object(out))
    }

    fn resources(&mut self, b: &Block, hcl: &str, json: &str) -> R<Value> {
        let mut out = Map::new();
        self.place(json.to_string(), hcl.to_string(), b.span());
        let mut devices = Vec::new();
        for item in b.body.iter() {
            match item {
                Structure::Block(d) if d.ident.as_str() == "device" => {
                    let i = devices.len();
                    let (dh, dj) = (format!("{hcl}.device[{i}]"), format!("{json}.Devices[{i}]"));
                    let mut v = self.simple_block(
                        d,
                        &dh,
                        &dj,
                        &[("count", "Count")],
                        &["constraint", "affinity"],
                    )?;
                    let name = label(d).ok_or_else(|| {
                        self.err_at(
                            &dh,
                            d.span(),
                            "a device block needs a label: device \"<vendor>/<type>/<name>\"",
                        )
                    })?;
                    v["Name"] = Value::String(name);
                    devices.push(v);
                }
                other => self.common(
                    other,
                    hcl,
                    json,
                    &mut out,
                    &[
                        ("cpu", "CPU"),
                        ("memory", "MemoryMB"),
                        ("memory_max", "MemoryMaxMB"),
                        ("cores", "Cores"),
                        ("disk", "DiskMB"),
                    ],
                )?,
            }
        }
        if !devices.is_empty() {
            out.insert("Devices".into(), Value::Array(devices));
        }
        Ok(Value::Object(out))
    }

    /// One of the plain blocks in `specs`, put into `out` under its JSON key.
    fn plain(
        &mut self,
        specs: &[BlockSpec],
        x: &Block,
        hcl: &str,
        json: &str,
        out: &mut Map<String, Value>,
    ) -> R<()> {
        let sp = spec(specs, x).expect("the caller matched the block against specs");
        let v = self.simple_block(
            x,
            &format!("{hcl}.{}", sp.hcl),
            &format!("{json}.{}", sp.json),
            sp.fields,
            &[],
        )?;
        out.insert(sp.json.into(), v);
        Ok(())
    }

    /// A group's `network` block: `mode`, and `port "<label>" { static, to }` blocks, split
    /// into Nomad's reserved (static) and dynamic ports. `dns` is accepted and ignored.
    fn network(&mut self, b: &Block, hcl: &str, json: &str) -> R<Value> {
        let mut out = Map::new();
        self.place(json.to_string(), hcl.to_string(), b.span());
        let (mut reserved, mut dynamic) = (Vec::new(), Vec::new());
        let mut i = 0;
        for item in b.body.iter() {
            match item {
                Structure::Block(p) if p.ident.as_str() == "port" => {
                    let ph = format!("{hcl}.port[{i}]");
                    i += 1;
                    let is_static = p
                        .body
                        .iter()
                        .any(|s| s.as_attribute().is_some_and(|a| a.key.as_str() == "static"));
                    let (list, key) = if is_static {
                        (&mut reserved, "ReservedPorts")
                    } else {
                        (&mut dynamic, "DynamicPorts")
                    };
                    let pj = format!("{json}.{key}[{}]", list.len());
                    let mut v = self.simple_block(
                        p,
                        &ph,
                        &pj,
                        &[
                            ("static", "Value"),
                            ("to", "To"),
                            ("host_network", "HostNetwork"),
                        ],
                        &[],
                    )?;
                    let label = label(p).ok_or_else(|| {
                        self.err_at(
                            &ph,
                            p.span(),
                            "a port block needs a label: port \"<label>\"",
                        )
                    })?;
                    self.place(format!("{pj}.Label"), ph.clone(), p.span());
                    v["Label"] = Value::String(label);
                    list.push(v);
                }
                Structure::Block(d) if d.ident.as_str() == "dns" => {}
                other => self.common(other, hcl, json, &mut out, &[("mode", "Mode")])?,
            }
        }
        out.insert("ReservedPorts".into(), Value::Array(reserved));
        out.insert("DynamicPorts".into(), Value::Array(dynamic));
        Ok(Value::Object(out))
    }

    /// A block of plain attributes renamed by `names`.
    fn simple_block(
        &mut self,
        b: &Block,
        hcl: &str,
        json: &str,
        names: &[(&str, &str)],
        ignored: &[&str],
    ) -> R<Value> {
        let mut out = Map::new();
        self.place(json.to_string(), hcl.to_string(), b.span());
        for item in b.body.iter() {
            if let Structure::Block(x) = item
                && ignored.contains(&x.ident.as_str())
            {
                continue;
            }
            self.common(item, hcl, json, &mut out, names)?;
        }
        Ok(Value::Object(out))
    }

    /// An attribute (renamed by `names`), or a `meta`/`env` block, or something ignored or
    /// unknown (passed on under its HCL name so the checker reports it at its place).
    fn common(
        &mut self,
        item: &Structure,
        hcl: &str,
        json: &str,
        out: &mut Map<String, Value>,
        names: &[(&str, &str)],
    ) -> R<()> {
        let (name, span) = match item {
            Structure::Attribute(a) => (a.key.as_str().to_string(), a.span()),
            Structure::Block(b) => (b.ident.as_str().to_string(), b.span()),
        };
        if IGNORED.contains(&name.as_str()) {
            tracing::debug!(field = %format!("{hcl}.{name}"), "ignored on a single node");
            return Ok(());
        }
        let json_key = names
            .iter()
            .find(|(h, _)| *h == name)
            .map(|(_, j)| j.to_string())
            .unwrap_or_else(|| name.clone());
        let (h, j) = (format!("{hcl}.{name}"), format!("{json}.{json_key}"));
        self.place(j, h.clone(), span.clone());
        let mut value = match item {
            Structure::Attribute(a) => self.expr(&a.value, &h)?,
            Structure::Block(b) => self.body_value(&b.body, &h)?,
        };
        if matches!(
            json_key.as_str(),
            "KillTimeout" | "ShutdownDelay" | "Interval" | "Delay"
        ) {
            value = match value {
                Value::String(s) => match crate::util::parse_duration(&s) {
                    Some(d) => Value::from(d.as_nanos() as u64),
                    None => {
                        return Err(self.err_at(
                            &h,
                            span,
                            format!("invalid duration {s:?} (use e.g. \"30s\", \"5m\")"),
                        ));
                    }
                },
                other => other,
            };
        }
        out.insert(json_key, value);
        Ok(())
    }

    /// A free-form body (a task's `config`, `meta`, `env`) as a JSON object. Repeated
    /// blocks of one name become an array.
    fn body_value(&mut self, body: &Body, hcl: &str) -> R<Value> {
        let mut out = Map::new();
        for item in body.iter() {
            match item {
                Structure::Attribute(a) => {
                    let v = self.expr(&a.value, &format!("{hcl}.{}", a.key.as_str()))?;
                    out.insert(a.key.as_str().to_string(), v);
                }
                Structure::Block(b) => {
                    let v = self.body_value(&b.body, &format!("{hcl}.{}", b.ident.as_str()))?;
                    match out.get_mut(b.ident.as_str()) {
                        Some(Value::Array(a)) => a.push(v),
                        Some(prev) => *prev = Value::Array(vec![prev.clone(), v]),
                        None => {
                            out.insert(b.ident.as_str().to_string(), v);
                        }
                    }
                }
            }
        }
        Ok(Value::Object(out))
    }

    /// `variable` blocks (with `-var` values over their defaults) and `locals` blocks, in
    /// the order they can be evaluated. A variable without a value is an error naming it.
    fn variables(&mut self, body: &Body, given: &BTreeMap<String, String>) -> R<()> {
        let mut declared = Vec::new();
        for b in body.iter().filter_map(|s| s.as_block()) {
            if b.ident.as_str() != "variable" {
                continue;
            }
            let name = label(b).ok_or_else(|| {
                self.err_at(
                    "variable",
                    b.span(),
                    "a variable block needs a label: variable \"<name>\"",
                )
            })?;
            let hcl = format!("variable.{name}");
            let mut default = None;
            for item in b.body.iter() {
                match item {
                    Structure::Attribute(a) if a.key.as_str() == "default" => {
                        default = Some(self.expr(&a.value, &format!("{hcl}.default"))?);
                    }
                    Structure::Attribute(a)
                        if matches!(a.key.as_str(), "type" | "description" | "sensitive") => {}
                    Structure::Block(v) if v.ident.as_str() == "validation" => {}
                    other => {
                        let (key, span) = match other {
                            Structure::Attribute(a) => (a.key.as_str().to_string(), a.span()),
                            Structure::Block(b) => (b.ident.as_str().to_string(), b.span()),
                        };
                        return Err(self.err_at(&format!("{hcl}.{key}"), span, "unknown field"));
                    }
                }
            }
            let value = match given.get(&name) {
                Some(text) => var_value(text),
                None => default.ok_or_else(|| {
                    self.err_at(
                        &hcl,
                        b.span(),
                        format!("variable {name:?} has no value: give it a default or pass -var {name}=..."),
                    )
                })?,
            };
            self.values.insert(format!("var.{name}"), value);
            declared.push(name);
        }
        if let Some(unknown) = given.keys().find(|k| !declared.contains(k)) {
            return Err(JobspecError::new(
                format!("var.{unknown}"),
                "no such variable is declared in the job file",
            ));
        }
        // Locals may refer to variables and to each other: evaluate what can be until a
        // round makes no progress.
        let mut pending: Vec<(String, &Expression, Option<Range<usize>>)> = body
            .iter()
            .filter_map(|s| s.as_block())
            .filter(|b| b.ident.as_str() == "locals")
            .flat_map(|b| b.body.iter().filter_map(|s| s.as_attribute()))
            .map(|a| (a.key.as_str().to_string(), &a.value, a.span()))
            .collect();
        while !pending.is_empty() {
            let before = pending.len();
            let mut last_err = None;
            pending.retain(
                |(name, e, _)| match self.expr(e, &format!("locals.{name}")) {
                    Ok(v) => {
                        self.values.insert(format!("local.{name}"), v);
                        false
                    }
                    Err(err) => {
                        last_err = Some(err);
                        true
                    }
                },
            );
            if pending.len() == before {
                return Err(last_err.expect("a local that did not evaluate left its error"));
            }
        }
        Ok(())
    }

    /// The value of `var.x` / `local.x`, if `e` is such a reference.
    fn reference(&self, e: &Expression) -> Option<Result<Value, String>> {
        let Expression::Traversal(t) = e else {
            return None;
        };
        let Expression::Variable(root) = &t.expr else {
            return None;
        };
        let root = root.as_str();
        if root != "var" && root != "local" {
            return None;
        }
        let [first, rest @ ..] = t.operators.as_slice() else {
            return Some(Err(format!("{root} needs a name: {root}.<name>")));
        };
        let TraversalOperator::GetAttr(name) = first.value() else {
            return Some(Err(format!("use {root}.<name>")));
        };
        let key = format!("{root}.{}", name.as_str());
        let Some(mut v) = self.values.get(&key).cloned() else {
            return Some(Err(format!("{key} is not defined")));
        };
        for op in rest {
            v = match (op.value(), v) {
                (TraversalOperator::GetAttr(a), Value::Object(mut m)) => match m.remove(a.as_str())
                {
                    Some(x) => x,
                    None => return Some(Err(format!("{key} has no attribute {:?}", a.as_str()))),
                },
                (TraversalOperator::Index(Expression::Number(n)), Value::Array(a)) => {
                    let i = n.value().as_u64().unwrap_or(u64::MAX) as usize;
                    match a.get(i) {
                        Some(x) => x.clone(),
                        None => return Some(Err(format!("{key}[{i}] is out of range"))),
                    }
                }
                (TraversalOperator::LegacyIndex(i), Value::Array(a)) => {
                    match a.get(*i.value() as usize) {
                        Some(x) => x.clone(),
                        None => return Some(Err(format!("{key}.{} is out of range", i.value()))),
                    }
                }
                _ => return Some(Err(format!("unsupported access into {key}"))),
            };
        }
        Some(Ok(v))
    }

    /// A template's text with `${var.*}` and `${local.*}` replaced by their values; other
    /// `${...}` (runtime interpolations such as `${NOMAD_TASK_NAME}`) stay for the client.
    fn substitute(&self, text: &str, hcl: &str, span: Option<Range<usize>>) -> R<String> {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(i) = rest.find("${") {
            let (head, tail) = rest.split_at(i);
            out.push_str(head);
            let Some(end) = tail.find('}') else {
                out.push_str(tail);
                return Ok(out);
            };
            let inner = tail[2..end].trim();
            if let Some(key) = ["var.", "local."]
                .iter()
                .find(|p| inner.starts_with(**p))
                .map(|_| inner)
            {
                let v = self.values.get(key).ok_or_else(|| {
                    self.err_at(hcl, span.clone(), format!("{key} is not defined"))
                })?;
                match v {
                    Value::String(s) => out.push_str(s),
                    Value::Number(_) | Value::Bool(_) => out.push_str(&v.to_string()),
                    _ => {
                        return Err(self.err_at(
                            hcl,
                            span.clone(),
                            format!(
                                "{key} is not a string, number or bool and cannot go in a string"
                            ),
                        ));
                    }
                }
            } else {
                out.push_str(&tail[..=end]);
            }
            rest = &tail[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    fn expr(&self, e: &Expression, hcl: &str) -> R<Value> {
        Ok(match e {
            Expression::Null(_) => Value::Null,
            Expression::Bool(b) => Value::Bool(*b.value()),
            Expression::Number(n) => {
                let text = n.value().to_string();
                serde_json::from_str::<Value>(&text)
                    .map_err(|_| self.err_at(hcl, e.span(), format!("unsupported number {text}")))?
            }
            Expression::String(s) => Value::String(s.value().to_string()),
            // Templates keep their `${...}` for the client to interpolate at run time.
            Expression::StringTemplate(_) => {
                let span = e
                    .span()
                    .ok_or_else(|| self.err_at(hcl, None, "template without source"))?;
                let raw = &self.src[span.clone()];
                let text = raw
                    .strip_prefix('"')
                    .and_then(|r| r.strip_suffix('"'))
                    .unwrap_or(raw)
                    .replace("\\\"", "\"")
                    .replace("\\n", "\n");
                Value::String(self.substitute(&text, hcl, Some(span))?)
            }
            Expression::HeredocTemplate(h) => {
                let span = h
                    .template
                    .span()
                    .ok_or_else(|| self.err_at(hcl, e.span(), "heredoc without source"))?;
                Value::String(self.substitute(&self.src[span.clone()], hcl, Some(span))?)
            }
            Expression::Array(a) => Value::Array(
                a.iter()
                    .enumerate()
                    .map(|(i, x)| self.expr(x, &format!("{hcl}[{i}]")))
                    .collect::<R<_>>()?,
            ),
            Expression::Object(o) => {
                let mut m = Map::new();
                for (k, v) in o.iter() {
                    let key = match k {
                        ObjectKey::Ident(i) => i.as_str().to_string(),
                        ObjectKey::Expression(Expression::String(s)) => s.value().to_string(),
                        ObjectKey::Expression(other) => {
                            return Err(self.err_at(
                                hcl,
                                other.span(),
                                "object keys must be names or plain strings",
                            ));
                        }
                    };
                    let v = self.expr(v.expr(), &format!("{hcl}.{key}"))?;
                    m.insert(key, v);
                }
                Value::Object(m)
            }
            Expression::Parenthesis(p) => self.expr(p.inner(), hcl)?,
            other => match self.reference(other) {
                Some(Ok(v)) => v,
                Some(Err(m)) => return Err(self.err_at(hcl, e.span(), m)),
                None => {
                    return Err(self.err_at(
                        hcl,
                        e.span(),
                        "only literal values, var.* and local.* are supported here (HCL functions and operators are not yet)",
                    ));
                }
            },
        })
    }
}

/// A `-var` value: an HCL literal when it parses as one, else the text as a string.
fn var_value(text: &str) -> Value {
    let src = format!("v = {text}\n");
    let conv = Conv {
        src: &src,
        places: Vec::new(),
        values: BTreeMap::new(),
    };
    hcl::edit::parser::parse_body(&src)
        .ok()
        .and_then(|body| {
            let attrs: Vec<_> = body.iter().filter_map(|s| s.as_attribute()).collect();
            match attrs.as_slice() {
                [a] if !matches!(
                    a.value,
                    Expression::StringTemplate(_) | Expression::HeredocTemplate(_)
                ) =>
                {
                    conv.expr(&a.value, "v").ok()
                }
                _ => None,
            }
        })
        .unwrap_or_else(|| Value::String(text.to_string()))
}

/// The HCL name of a Nomad JSON field, for naming a missing field.
fn hcl_name(json_field: &str) -> String {
    let table = [
        ("ID", "id"),
        ("Name", "name"),
        ("Driver", "driver"),
        ("TaskGroups", "group"),
        ("Tasks", "task"),
        ("MemoryMB", "memory"),
        ("MemoryMaxMB", "memory_max"),
        ("CPU", "cpu"),
        ("Hook", "hook"),
        ("Count", "count"),
    ];
    table
        .iter()
        .copied()
        .chain(TEMPLATE_FIELDS.iter().map(|&(h, j)| (j, h)))
        .find(|(j, _)| *j == json_field)
        .map(|(_, h)| h.to_string())
        .unwrap_or_else(|| json_field.to_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    const JOB: &str = r#"
job "web" {
  type        = "service"
  datacenters = ["dc1"]
  meta {
    team = "core"
  }
  update {
    stagger = "30s"
  }
  group "frontend" {
    count = 2
    restart {
      attempts = 3
      delay    = "10s"
      mode     = "delay"
    }
    task "server" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo ${NOMAD_TASK_NAME} on ${attr.kernel.name}"]
      }
      env {
        GREETING = "hi ${node.unique.name}"
      }
      resources {
        cpu    = 200
        memory = 128
      }
      kill_timeout = "20s"
      logs {
        max_files     = 3
        max_file_size = 5
      }
    }
    task "init" {
      driver = "mock"
      lifecycle {
        hook = "prestart"
      }
    }
  }
}
"#;

    #[test]
    fn a_nomad_job_file_parses_with_interpolations_kept() {
        let j = parse_job_hcl(JOB).unwrap();
        assert_eq!(j.id, "web");
        assert_eq!(j.meta["team"], "core");
        let g = &j.task_groups[0];
        assert_eq!((g.name.as_str(), g.count), ("frontend", 2));
        assert_eq!(g.restart_policy.attempts, 3);
        assert_eq!(g.restart_policy.delay, 10_000_000_000);
        let t = &g.tasks[0];
        assert_eq!(
            t.config["args"][1],
            "echo ${NOMAD_TASK_NAME} on ${attr.kernel.name}"
        );
        assert_eq!(t.env["GREETING"], "hi ${node.unique.name}");
        assert_eq!((t.resources.cpu, t.resources.memory_mb), (200, 128));
        assert_eq!(t.kill_timeout, 20_000_000_000);
        assert_eq!(
            (t.log_config.max_files, t.log_config.max_file_size_mb),
            (3, 5)
        );
        assert_eq!(g.tasks[1].lifecycle.as_ref().unwrap().hook, "prestart");
        assert_eq!(
            g.tasks[1].restart_policy.mode,
            crate::jobspec::RestartMode::Delay,
            "tasks inherit the group policy"
        );
    }

    #[test]
    fn errors_name_the_hcl_path_and_line() {
        let bad = JOB.replace("memory = 128", "memory = \"lots\"");
        let e = parse_job_hcl(&bad).unwrap_err();
        assert_eq!(
            e.path, "job.group[0].task[0].resources.memory (line 29)",
            "{e}"
        );
        let bad = JOB.replace("driver = \"mock\"", "driver = \"mock\"\n      leadr = true");
        let e = parse_job_hcl(&bad).unwrap_err();
        assert_eq!(e.path, "job.group[0].task[1].leadr (line 39)", "{e}");
        assert!(e.message.contains("unknown field"), "{e}");
        let bad = JOB.replace("kill_timeout = \"20s\"", "kill_timeout = \"soon\"");
        let e = parse_job_hcl(&bad).unwrap_err();
        assert!(
            e.path
                .starts_with("job.group[0].task[0].kill_timeout (line 31)"),
            "{e}"
        );
        let e = parse_job_hcl("job \"x\" {\n  group \"g\" {\n    task \"t\" {\n    }\n  }\n}\n")
            .unwrap_err();
        assert_eq!(e.path, "job.group[0].task[0].driver (line 3)", "{e}");
        let e = parse_job_hcl("job \"x\" {\n  group \"g\" {\n").unwrap_err();
        assert!(
            e.message.contains("invalid HCL") && e.message.contains("line 2"),
            "{e}"
        );
        let e = parse_job_hcl("job \"x\" {\n  priority = var.p\n}\n").unwrap_err();
        assert!(e.path.starts_with("job.priority (line 2)"), "{e}");
    }

    const TEMPLATED: &str = r#"job "t" {
  group "g" {
    task "web" {
      driver = "mock"
      template {
        data        = "port={{ env \"PORT\" }}"
        destination = "local/app.conf"
        change_mode = "noop"
        wait {
          min = "2s"
        }
      }
      template {
        source      = "local/in.tpl"
        destination = "secrets/app.env"
        env         = true
      }
    }
  }
}
"#;

    #[test]
    fn a_group_network_block_becomes_reserved_and_dynamic_ports() {
        let src = r#"job "n" {
  group "g" {
    network {
      mode = "host"
      port "http" {
        static = 8080
      }
      port "metrics" {
        to = 9100
      }
      dns {
        servers = ["1.1.1.1"]
      }
    }
    task "t" {
      driver = "mock"
    }
  }
}
"#;
        let job = parse_job_hcl(src).unwrap();
        let n = &job.task_groups[0].networks[0];
        assert_eq!(n.reserved_ports.len(), 1);
        assert_eq!(
            (
                n.reserved_ports[0].label.as_str(),
                n.reserved_ports[0].value
            ),
            ("http", 8080)
        );
        assert_eq!(n.dynamic_ports[0].label, "metrics");
        assert_eq!((n.dynamic_ports[0].value, n.dynamic_ports[0].to), (0, 9100));

        let e = parse_job_hcl(&src.replace("mode = \"host\"", "mode = \"bridge\"")).unwrap_err();
        assert_eq!(e.path, "job.group[0].network.mode (line 4)", "{e}");
        let e = parse_job_hcl(&src.replace("static = 8080", "static = 70000")).unwrap_err();
        assert_eq!(
            e.path, "job.group[0].network.port[0].static (line 6)",
            "{e}"
        );
        let e = parse_job_hcl(&src.replace("port \"metrics\"", "port \"http\"")).unwrap_err();
        assert!(e.message.contains("duplicate port label"), "{e}");
    }

    const WITH_VARS: &str = r#"variable "region" {
  type    = string
  default = "eu"
}
variable "n" {
  default = 2
}
variable "tags" {
  default = ["a", "b"]
}
locals {
  name = "${local.prefix}-web"
  prefix = "${var.region}"
}
job "v" {
  region = var.region
  group "g" {
    count = var.n
    task "t" {
      driver = "mock"
      env {
        WHERE = "${local.name} in ${NOMAD_DC}"
        TAG   = var.tags[1]
      }
    }
  }
}
"#;

    #[test]
    fn variables_and_locals_resolve_and_runtime_interpolations_stay() {
        let job = parse_job_hcl(WITH_VARS).unwrap();
        assert_eq!(job.region, "eu");
        assert_eq!(job.task_groups[0].count, 2);
        let env = &job.task_groups[0].tasks[0].env;
        assert_eq!(env["WHERE"], "eu-web in ${NOMAD_DC}");
        assert_eq!(env["TAG"], "b");

        let mut vars = BTreeMap::new();
        vars.insert("region".to_string(), "us".to_string());
        vars.insert("n".to_string(), "3".to_string());
        let job = parse_job_hcl_with_vars(WITH_VARS, &vars).unwrap();
        assert_eq!((job.region.as_str(), job.task_groups[0].count), ("us", 3));
        assert_eq!(
            job.task_groups[0].tasks[0].env["WHERE"],
            "us-web in ${NOMAD_DC}"
        );

        vars.insert("nope".to_string(), "1".to_string());
        let e = parse_job_hcl_with_vars(WITH_VARS, &vars).unwrap_err();
        assert_eq!(e.path, "var.nope", "{e}");
        let e = parse_job_hcl(&WITH_VARS.replace("  default = 2\n", "")).unwrap_err();
        assert!(e.message.contains("variable \"n\" has no value"), "{e}");
        assert!(e.path.starts_with("variable.n (line 5)"), "{e}");
        let e = parse_job_hcl(&WITH_VARS.replace("var.tags[1]", "var.tagz[1]")).unwrap_err();
        assert!(
            e.path.starts_with("job.group[0].task[0].env.TAG (line 23)"),
            "{e}"
        );
        assert!(e.message.contains("var.tagz is not defined"), "{e}");
        let e = parse_job_hcl(&WITH_VARS.replace("var.tags[1]", "upper(var.region)")).unwrap_err();
        assert!(e.message.contains("functions"), "{e}");
    }

    #[test]
    fn template_blocks_become_templates() {
        let job = parse_job_hcl(TEMPLATED).unwrap();
        let t = &job.task_groups[0].tasks[0].templates;
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].embedded_tmpl, "port={{ env \"PORT\" }}");
        assert_eq!(t[0].dest_path, "local/app.conf");
        assert_eq!(t[0].change_mode, "noop");
        assert_eq!(
            (t[0].left_delim.as_str(), t[0].perms.as_str()),
            ("{{", "0644")
        );
        assert_eq!(t[1].source_path, "local/in.tpl");
        assert!(t[1].envvars && !t[0].envvars);
        assert_eq!(t[1].change_mode, "restart");

        let bad = TEMPLATED.replace("change_mode = \"noop\"", "change_mode = \"reload\"");
        let e = parse_job_hcl(&bad).unwrap_err();
        assert_eq!(
            e.path, "job.group[0].task[0].template[0].change_mode (line 8)",
            "{e}"
        );
        let bad = TEMPLATED.replace("        destination = \"local/app.conf\"\n", "");
        let e = parse_job_hcl(&bad).unwrap_err();
        assert_eq!(
            e.path, "job.group[0].task[0].template[0].destination (line 5)",
            "{e}"
        );
        let bad = TEMPLATED.replace(
            "source      = \"local/in.tpl\"",
            "data = \"x\"\n        source = \"y\"",
        );
        let e = parse_job_hcl(&bad).unwrap_err();
        assert!(e.message.contains("exactly one of"), "{e}");
    }
}
