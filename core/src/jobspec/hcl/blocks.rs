//! HCL blocks into the Nomad API JSON shape: the job, its groups and tasks and their
//! blocks, each value recorded with its HCL path and span so errors found later in the
//! JSON layer name the HCL place.

use hcl::edit::Span;
use hcl::edit::structure::{Block, Body, Structure};
use serde_json::{Map, Value};

use super::{
    BlockSpec, Conv, GROUP_BLOCKS, JOB_BLOCKS, R, TASK_BLOCKS, TEMPLATE_FIELDS, kept, label, spec,
};

impl Conv<'_> {
    pub(super) fn job(&mut self, b: &Block) -> R<Value> {
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
                Structure::Block(p) if spec(JOB_BLOCKS, p).is_some() => {
                    let spec = spec(JOB_BLOCKS, p).expect("matched above");
                    let value = self.simple_block(
                        p,
                        &format!("job.{}", spec.hcl),
                        &format!("Job.{}", spec.json),
                        spec.fields,
                        &[],
                    )?;
                    out.insert(spec.json.into(), value);
                }
                other if kept::at(kept::JOB, other).is_some() => {
                    let k = kept::at(kept::JOB, other).expect("matched above");
                    self.kept(k, other, "job", "Job", &mut out)?
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

    pub(super) fn group(&mut self, b: &Block, i: usize) -> R<Value> {
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
                other if kept::at(kept::GROUP, other).is_some() => {
                    let k = kept::at(kept::GROUP, other).expect("matched above");
                    self.kept(k, other, &hcl, &json, &mut out)?
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

    pub(super) fn task(&mut self, b: &Block, g: usize, t: usize) -> R<Value> {
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
                    templates.push(self.template(x, &hcl, &json, i)?);
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
                other if kept::at(kept::TASK, other).is_some() => {
                    let k = kept::at(kept::TASK, other).expect("matched above");
                    self.kept(k, other, &hcl, &json, &mut out)?
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

    pub(super) fn resources(&mut self, b: &Block, hcl: &str, json: &str) -> R<Value> {
        let mut out = Map::new();
        self.place(json.to_string(), hcl.to_string(), b.span());
        let mut devices = Vec::new();
        for item in b.body.iter() {
            match item {
                Structure::Block(d) if d.ident.as_str() == "device" => {
                    let i = devices.len();
                    let (dh, dj) = (format!("{hcl}.device[{i}]"), format!("{json}.Devices[{i}]"));
                    // `constraint` blocks become `Constraints` on the way.
                    let mut v =
                        self.simple_block(d, &dh, &dj, &[("count", "Count")], &["affinity"])?;
                    let affinities = d
                        .body
                        .iter()
                        .filter_map(|x| match x {
                            Structure::Block(a) if a.ident.as_str() == "affinity" => Some(a),
                            _ => None,
                        })
                        .map(|a| self.affinity(a, &format!("{dh}.affinity")))
                        .collect::<R<Vec<Value>>>()?;
                    if !affinities.is_empty() {
                        v["Affinities"] = Value::Array(affinities);
                    }
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
                other if kept::at(kept::RESOURCES, other).is_some() => {
                    let k = kept::at(kept::RESOURCES, other).expect("matched above");
                    self.kept(k, other, hcl, json, &mut out)?
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
    pub(super) fn plain(
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
    pub(super) fn network(&mut self, b: &Block, hcl: &str, json: &str) -> R<Value> {
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

    /// A `template` block: its attributes, and its `wait` and `change_script` blocks kept.
    fn template(&mut self, x: &Block, hcl: &str, json: &str, i: usize) -> R<Value> {
        let (h, j) = (
            format!("{hcl}.template[{i}]"),
            format!("{json}.Templates[{i}]"),
        );
        let mut out = Map::new();
        self.place(j.clone(), h.clone(), x.span());
        for item in x.body.iter() {
            match kept::at(kept::TEMPLATE, item) {
                Some(k) => self.kept(k, item, &h, &j, &mut out)?,
                None => self.common(item, &h, &j, &mut out, TEMPLATE_FIELDS)?,
            }
        }
        Ok(Value::Object(out))
    }

    /// A block of plain attributes renamed by `names`.
    pub(super) fn simple_block(
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

    /// A `constraint` block as Nomad's JSON has it (`LTarget`, `Operand`, `RTarget`):
    /// `attribute`, `operator` (default `=`) and `value`, or the shorthands `regexp`,
    /// `version`, `semver`, `set_contains` and `distinct_hosts`, as Nomad's HCL takes them.
    fn constraint(&mut self, b: &Block, hcl: &str) -> R<Value> {
        let v = self.body_value(&b.body, hcl)?;
        let text = |k: &str| match v.get(k) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        let mut operand = match text("operator") {
            o if o.is_empty() => "=".to_string(),
            o => o,
        };
        let mut rtarget = text("value");
        for short in ["regexp", "version", "semver", "set_contains"] {
            if v.get(short).is_some() {
                operand = short.to_string();
                rtarget = text(short);
            }
        }
        if v.get("distinct_hosts").is_some() {
            operand = "distinct_hosts".into();
            rtarget = text("distinct_hosts");
        }
        Ok(serde_json::json!({
            "LTarget": text("attribute"),
            "RTarget": rtarget,
            "Operand": operand,
        }))
    }

    /// An `affinity` block as Nomad's JSON has it (`LTarget`, `Operand`, `RTarget`,
    /// `Weight`): `attribute`, `operator` (default `=`), `value` and `weight` (default 50),
    /// or the shorthands `regexp`, `version`, `semver` and `set_contains*`.
    pub(super) fn affinity(&mut self, b: &Block, hcl: &str) -> R<Value> {
        let mut c = self.constraint(b, hcl)?;
        let v = self.body_value(&b.body, hcl)?;
        for short in ["set_contains_any", "set_contains_all"] {
            if let Some(x) = v.get(short) {
                c["Operand"] = Value::String(short.into());
                c["RTarget"] = match x {
                    Value::String(s) => Value::String(s.clone()),
                    other => Value::String(other.to_string()),
                };
            }
        }
        c["Weight"] = v.get("weight").cloned().unwrap_or(Value::from(50));
        Ok(c)
    }

    /// An attribute (renamed by `names`), or a `meta`/`env` block, or something ignored or
    /// unknown (passed on under its HCL name so the checker reports it at its place).
    pub(super) fn common(
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
        if let ("constraint", Structure::Block(b)) = (name.as_str(), item) {
            let c = self.constraint(b, &format!("{hcl}.constraint"))?;
            match out.get_mut("Constraints") {
                Some(Value::Array(a)) => a.push(c),
                _ => {
                    out.insert("Constraints".into(), Value::Array(vec![c]));
                }
            }
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
            "KillTimeout" | "ShutdownDelay" | "Interval" | "Delay" | "Splay"
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
    pub(super) fn body_value(&mut self, body: &Body, hcl: &str) -> R<Value> {
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
}
