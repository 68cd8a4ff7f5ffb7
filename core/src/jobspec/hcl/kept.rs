//! The Nomad HCL blocks and attributes Paddock keeps without acting on them (or not yet),
//! turned into Nomad's JSON shape, so that an HCL job reads back, and is warned about,
//! exactly as the same job sent as JSON is.
//!
//! A block's attributes become Nomad's Go field names (`max_parallel` is `MaxParallel`,
//! `tls_skip_verify` is `TLSSkipVerify`, with the few renames Nomad's API makes, as
//! `port` → `PortLabel`); durations (`"30s"`) become nanoseconds; free-form maps (`meta`,
//! `options`, `config`) keep their keys as written; repeated blocks become lists, and
//! labelled ones carry their label in the field Nomad puts it in.

use hcl::edit::Span;
use hcl::edit::structure::{Body, Structure};
use serde_json::{Map, Value};

use super::{Conv, R, label};

/// How a kept name sits in its parent.
#[derive(Clone, Copy)]
enum Shape {
    /// An attribute: `all_at_once = true`.
    Attr,
    /// One block: `update { ... }` → an object.
    Block,
    /// Repeatable blocks: `service { ... }` → a list of objects.
    List,
    /// Repeatable labelled blocks, the label in this field: `action "x"` → `{"Name": "x"}`.
    Labelled(&'static str),
    /// Labelled blocks as a map by label, the label also in `Name`: `volume "data"`.
    Map,
}

/// One kept name: its HCL name, the JSON key it becomes and its shape.
pub(super) struct Kept {
    hcl: &'static str,
    json: &'static str,
    shape: Shape,
}

const fn k(hcl: &'static str, json: &'static str, shape: Shape) -> Kept {
    Kept { hcl, json, shape }
}

/// Kept at job level.
pub(super) const JOB: &[Kept] = &[
    k("all_at_once", "AllAtOnce", Shape::Attr),
    k("node_pool", "NodePool", Shape::Attr),
    k("affinity", "Affinities", Shape::List),
    k("spread", "Spreads", Shape::List),
    k("update", "Update", Shape::Block),
    k("multiregion", "Multiregion", Shape::Block),
    k("reschedule", "Reschedule", Shape::Block),
    k("migrate", "Migrate", Shape::Block),
    k("ui", "UI", Shape::Block),
];

/// Kept at group level.
pub(super) const GROUP: &[Kept] = &[
    k("affinity", "Affinities", Shape::List),
    k("spread", "Spreads", Shape::List),
    k("update", "Update", Shape::Block),
    k("migrate", "Migrate", Shape::Block),
    k("reschedule", "ReschedulePolicy", Shape::Block),
    k("scaling", "Scaling", Shape::Block),
    k("service", "Services", Shape::List),
    k("volume", "Volumes", Shape::Map),
    k("consul", "Consul", Shape::Block),
    k("disconnect", "Disconnect", Shape::Block),
    k(
        "stop_after_client_disconnect",
        "StopAfterClientDisconnect",
        Shape::Attr,
    ),
    k("max_client_disconnect", "MaxClientDisconnect", Shape::Attr),
    k(
        "prevent_reschedule_on_lost",
        "PreventRescheduleOnLost",
        Shape::Attr,
    ),
    k("max_run_duration", "MaxRunDuration", Shape::Attr),
];

/// Kept at task level.
pub(super) const TASK: &[Kept] = &[
    k("affinity", "Affinities", Shape::List),
    k("service", "Services", Shape::List),
    k("vault", "Vault", Shape::Block),
    k("consul", "Consul", Shape::Block),
    k("artifact", "Artifacts", Shape::List),
    k("volume_mount", "VolumeMounts", Shape::List),
    k("csi_plugin", "CSIPluginConfig", Shape::Block),
    k("identity", "Identities", Shape::List),
    k("action", "Actions", Shape::Labelled("Name")),
    k("scaling", "ScalingPolicies", Shape::Labelled("Type")),
    k("secret", "Secrets", Shape::Labelled("Name")),
    k("schedule", "Schedule", Shape::Block),
    k("kind", "Kind", Shape::Attr),
];

/// Kept in a task's `resources`: Nomad's older place for a task's ports.
pub(super) const RESOURCES: &[Kept] = &[k("network", "Networks", Shape::List)];

/// Kept in a `template`.
pub(super) const TEMPLATE: &[Kept] = &[
    k("wait", "Wait", Shape::Block),
    k("change_script", "ChangeScript", Shape::Block),
];

/// Attribute renames where Nomad's API field is not the HCL name in CamelCase.
const RENAMES: &[(&str, &str)] = &[
    ("port", "PortLabel"),
    ("task", "TaskName"),
    ("source", "GetterSource"),
    ("options", "GetterOptions"),
    ("headers", "GetterHeaders"),
    ("mode", "GetterMode"),
    ("destination", "RelativeDest"),
    ("insecure", "GetterInsecure"),
    ("selinux_label", "SELinuxLabel"),
    ("fs_type", "FSType"),
    ("aud", "Audience"),
    ("target", "SpreadTarget"),
    ("region", "Regions"),
    ("link", "Links"),
];

/// Renames that hold only inside one block (an artifact's `source` is `GetterSource`; a
/// volume's is `Source`): the block's HCL name, then the attribute.
const RENAMES_ONLY_IN: &[(&str, &[&str])] = &[
    (
        "artifact",
        &[
            "source",
            "options",
            "headers",
            "mode",
            "destination",
            "insecure",
        ],
    ),
    ("service", &["port", "task"]),
    ("check", &["port", "task"]),
    ("spread", &["target"]),
    ("multiregion", &["region"]),
    ("ui", &["link"]),
    ("volume_mount", &["selinux_label"]),
    ("mount_options", &["fs_type"]),
    ("identity", &["aud"]),
];

/// Blocks whose keys are the user's, kept as written.
const FREE_FORM: &[&str] = &[
    "meta",
    "canary_meta",
    "tagged_addresses",
    "options",
    "headers",
    "header",
    "config",
    "env",
    "policy",
];

/// Attributes holding a duration (`"30s"` → nanoseconds, as Nomad's API has them).
const DURATIONS: &[&str] = &[
    "interval",
    "timeout",
    "delay",
    "max_delay",
    "stagger",
    "min_healthy_time",
    "healthy_deadline",
    "progress_deadline",
    "grace",
    "lost_after",
    "stop_on_client_after",
    "max_client_disconnect",
    "stop_after_client_disconnect",
    "health_timeout",
    "ttl",
    "max_run_duration",
];

/// Labelled blocks inside kept blocks: the field their label goes into.
const INNER_LABELS: &[(&str, &str)] = &[("target", "Value"), ("region", "Name")];

/// Blocks inside kept blocks that are lists even when there is one.
const INNER_LISTS: &[&str] = &["check", "target", "region", "link"];

/// Nomad's Go name of an HCL name: `max_parallel` → `MaxParallel`, `tls_skip_verify` →
/// `TLSSkipVerify`.
fn go_name(hcl: &str) -> String {
    hcl.split('_')
        .map(|w| match w {
            "id" | "ttl" | "tls" | "url" | "ip" | "grpc" | "cpu" | "mb" | "dns" | "ui" => {
                w.to_uppercase()
            }
            _ => {
                let mut c = w.chars();
                c.next()
                    .map(|f| f.to_uppercase().chain(c).collect())
                    .unwrap_or_default()
            }
        })
        .collect()
}

fn rename(block: &str, attr: &str) -> String {
    let scoped = RENAMES_ONLY_IN
        .iter()
        .any(|(b, attrs)| *b == block && attrs.contains(&attr));
    match RENAMES.iter().find(|(h, _)| *h == attr) {
        Some((_, j)) if scoped => j.to_string(),
        _ => go_name(attr),
    }
}

/// The kept entry of `level` an item is, by its name.
pub(super) fn at(level: &'static [Kept], item: &Structure) -> Option<&'static Kept> {
    let name = match item {
        Structure::Attribute(a) => a.key.as_str(),
        Structure::Block(b) => b.ident.as_str(),
    };
    level.iter().find(|k| k.hcl == name)
}

impl Conv<'_> {
    /// Put the kept `item` (an entry of `find`) into `out` under its JSON key.
    pub(super) fn kept(
        &mut self,
        kept: &Kept,
        item: &Structure,
        hcl: &str,
        json: &str,
        out: &mut Map<String, Value>,
    ) -> R<()> {
        let h = format!("{hcl}.{}", kept.hcl);
        match (kept.shape, item) {
            (Shape::Attr, Structure::Attribute(a)) => {
                let j = format!("{json}.{}", kept.json);
                self.place(j, h.clone(), a.span());
                let v = self.kept_value("", kept.hcl, &a.value, &h, a.span())?;
                out.insert(kept.json.into(), v);
            }
            (Shape::Block, Structure::Block(b)) => {
                let j = format!("{json}.{}", kept.json);
                self.place(j, h.clone(), b.span());
                let v = self.kept_block(kept.hcl, &b.body, &h)?;
                out.insert(kept.json.into(), v);
            }
            (Shape::List | Shape::Labelled(_), Structure::Block(b)) => {
                self.kept_in_list(kept, b, &h, json, out)?
            }
            (Shape::Map, Structure::Block(b)) => {
                let name = self.label_of(kept, b, &h)?;
                let j = format!("{json}.{}.{name}", kept.json);
                self.place(j, format!("{h}.{name}"), b.span());
                let mut v = self.kept_block(kept.hcl, &b.body, &h)?;
                v["Name"] = Value::String(name.clone());
                if let Value::Object(m) = out
                    .entry(kept.json)
                    .or_insert_with(|| Value::Object(Map::new()))
                {
                    m.insert(name, v);
                }
            }
            (_, Structure::Attribute(a)) => {
                return Err(self.err_at(
                    &h,
                    a.span(),
                    format!("{} is a block: {} {{ ... }}", kept.hcl, kept.hcl),
                ));
            }
            (_, Structure::Block(b)) => {
                return Err(self.err_at(
                    &h,
                    b.span(),
                    format!("{} is an attribute: {} = ...", kept.hcl, kept.hcl),
                ));
            }
        }
        Ok(())
    }

    /// One more block of a kept list (`service`, `artifact`, `action "x"`).
    fn kept_in_list(
        &mut self,
        kept: &Kept,
        b: &hcl::edit::structure::Block,
        h: &str,
        json: &str,
        out: &mut Map<String, Value>,
    ) -> R<()> {
        let list = out
            .entry(kept.json)
            .or_insert_with(|| Value::Array(Vec::new()));
        let i = list.as_array().map_or(0, Vec::len);
        let (h, j) = (format!("{h}[{i}]"), format!("{json}.{}[{i}]", kept.json));
        self.place(j, h.clone(), b.span());
        let mut v = if kept.hcl == "affinity" {
            self.affinity(b, &h)?
        } else {
            self.kept_block(kept.hcl, &b.body, &h)?
        };
        if let Shape::Labelled(field) = kept.shape {
            v[field] = Value::String(self.label_of(kept, b, &h)?);
        }
        if let Some(Value::Array(a)) = out.get_mut(kept.json) {
            a.push(v);
        }
        Ok(())
    }

    /// A labelled kept block's label, or an error at its place.
    fn label_of(&self, kept: &Kept, b: &hcl::edit::structure::Block, h: &str) -> R<String> {
        label(b).ok_or_else(|| {
            self.err_at(
                h,
                b.span(),
                format!("a {0} block needs a label: {0} \"<name>\"", kept.hcl),
            )
        })
    }

    /// A kept block's body in Nomad's JSON shape.
    pub(super) fn kept_block(&mut self, block: &str, body: &Body, hcl: &str) -> R<Value> {
        if FREE_FORM.contains(&block) {
            return self.body_value(body, hcl);
        }
        let mut out = Map::new();
        for item in body.iter() {
            match item {
                Structure::Attribute(a) => {
                    let name = a.key.as_str();
                    let h = format!("{hcl}.{name}");
                    let v = self.kept_value(block, name, &a.value, &h, a.span())?;
                    out.insert(rename(block, name), v);
                }
                Structure::Block(b) => {
                    let name = b.ident.as_str();
                    let h = format!("{hcl}.{name}");
                    let mut v = self.kept_block(name, &b.body, &h)?;
                    if let Some((_, field)) = INNER_LABELS.iter().find(|(n, _)| *n == name)
                        && let Some(l) = label(b)
                    {
                        v[*field] = Value::String(l);
                    }
                    let key = rename(block, name);
                    let key = if INNER_LISTS.contains(&name) && key == go_name(name) {
                        // A list Nomad names in the plural (`link` → `Links`).
                        format!("{key}s")
                    } else {
                        key
                    };
                    if INNER_LISTS.contains(&name) {
                        if let Value::Array(list) =
                            out.entry(key).or_insert_with(|| Value::Array(Vec::new()))
                        {
                            list.push(v);
                        }
                    } else {
                        out.insert(key, v);
                    }
                }
            }
        }
        Ok(Value::Object(out))
    }

    /// An attribute's value; a duration string becomes nanoseconds.
    fn kept_value(
        &mut self,
        block: &str,
        name: &str,
        e: &hcl::edit::expr::Expression,
        hcl: &str,
        span: Option<std::ops::Range<usize>>,
    ) -> R<Value> {
        let v = self.expr(e, hcl)?;
        if !(DURATIONS.contains(&name) || block == "wait" && ["min", "max"].contains(&name)) {
            return Ok(v);
        }
        match v {
            Value::String(s) => match crate::util::parse_duration(&s) {
                Some(d) => Ok(Value::from(d.as_nanos() as u64)),
                None => Err(self.err_at(
                    hcl,
                    span,
                    format!("invalid duration {s:?} (use e.g. \"30s\", \"5m\")"),
                )),
            },
            other => Ok(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::go_name;

    #[test]
    fn go_names_follow_nomads_acronyms() {
        assert_eq!(go_name("max_parallel"), "MaxParallel");
        assert_eq!(go_name("tls_skip_verify"), "TLSSkipVerify");
        assert_eq!(go_name("grpc_use_tls"), "GRPCUseTLS");
        assert_eq!(go_name("id"), "ID");
    }
}
