//! Differences between two versions of a job in Nomad's `JobDiff` shape (`nomad job plan`,
//! `/v1/job/{id}/versions?diffs=true`): edited, added and deleted fields by name, nested
//! blocks as objects, task groups and tasks matched by name. The comparison walks the
//! jobs' JSON, so every field the API shows is covered.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::jobspec::Job;

/// Fields the agent sets, never part of a diff.
const SERVER_FIELDS: &[&str] = &[
    "Status",
    "StatusDescription",
    "Stable",
    "Version",
    "SubmitTime",
    "CreateIndex",
    "ModifyIndex",
    "JobModifyIndex",
];

/// How something changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum DiffType {
    /// Unchanged.
    None,
    /// New.
    Added,
    /// Gone.
    Deleted,
    /// Changed.
    Edited,
}

/// One changed field (Nomad's `FieldDiff`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct FieldDiff {
    /// How it changed.
    #[serde(rename = "Type")]
    pub kind: DiffType,
    /// Field name (`Meta[owner]` for a map entry).
    pub name: String,
    /// Value before, as text.
    pub old: String,
    /// Value after, as text.
    pub new: String,
    /// Notes such as "forces create/destroy update".
    pub annotations: Vec<String>,
}

/// A changed block (Nomad's `ObjectDiff`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ObjectDiff {
    /// How it changed.
    #[serde(rename = "Type")]
    pub kind: DiffType,
    /// Block name.
    pub name: String,
    /// Its changed fields.
    pub fields: Vec<FieldDiff>,
    /// Its changed sub-blocks.
    pub objects: Vec<ObjectDiff>,
}

/// A changed task (Nomad's `TaskDiff`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct TaskDiff {
    /// How it changed.
    #[serde(rename = "Type")]
    pub kind: DiffType,
    /// Task name.
    pub name: String,
    /// Its changed fields.
    pub fields: Vec<FieldDiff>,
    /// Its changed blocks.
    pub objects: Vec<ObjectDiff>,
    /// Notes.
    pub annotations: Vec<String>,
}

/// A changed task group (Nomad's `TaskGroupDiff`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct TaskGroupDiff {
    /// How it changed.
    #[serde(rename = "Type")]
    pub kind: DiffType,
    /// Group name.
    pub name: String,
    /// Its changed fields.
    pub fields: Vec<FieldDiff>,
    /// Its changed blocks.
    pub objects: Vec<ObjectDiff>,
    /// Its tasks.
    pub tasks: Vec<TaskDiff>,
    /// What a plan does to its allocations, by kind (filled by plans).
    pub updates: std::collections::BTreeMap<String, u64>,
}

/// How a job changed (Nomad's `JobDiff`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct JobDiff {
    /// How it changed.
    #[serde(rename = "Type")]
    pub kind: DiffType,
    /// Job id.
    #[serde(rename = "ID")]
    pub id: String,
    /// Its changed fields.
    pub fields: Vec<FieldDiff>,
    /// Its changed blocks.
    pub objects: Vec<ObjectDiff>,
    /// Its task groups.
    pub task_groups: Vec<TaskGroupDiff>,
}

/// How `new` differs from `old` (`old` none: the job is new).
pub fn diff(old: Option<&Job>, new: &Job) -> JobDiff {
    let (old_v, new_v) = (old.map(spec_json), spec_json(new));
    let empty = Map::new();
    let o = old_v.as_ref().and_then(Value::as_object).unwrap_or(&empty);
    let n = new_v.as_object().unwrap_or(&empty);
    let (fields, objects) = compare(o, n, &["TaskGroups"]);
    let groups = by_name(o.get("TaskGroups"), n.get("TaskGroups"))
        .into_iter()
        .map(|(name, og, ng)| group_diff(name, og, ng))
        .collect::<Vec<_>>();
    let kind = match old {
        None => DiffType::Added,
        Some(_)
            if fields.is_empty()
                && objects.is_empty()
                && groups.iter().all(|g| g.kind == DiffType::None) =>
        {
            DiffType::None
        }
        Some(_) => DiffType::Edited,
    };
    JobDiff {
        kind,
        id: new.id.clone(),
        fields,
        objects,
        task_groups: groups,
    }
}

fn spec_json(job: &Job) -> Value {
    let mut v = serde_json::to_value(job).unwrap_or_default();
    if let Some(m) = v.as_object_mut() {
        for f in SERVER_FIELDS {
            m.remove(*f);
        }
    }
    v
}

fn group_diff(name: String, old: Option<&Value>, new: Option<&Value>) -> TaskGroupDiff {
    let empty = Map::new();
    let o = old.and_then(Value::as_object).unwrap_or(&empty);
    let n = new.and_then(Value::as_object).unwrap_or(&empty);
    let (fields, objects) = compare(o, n, &["Tasks"]);
    let tasks = by_name(o.get("Tasks"), n.get("Tasks"))
        .into_iter()
        .map(|(name, ot, nt)| {
            let o = ot.and_then(Value::as_object).unwrap_or(&empty);
            let n = nt.and_then(Value::as_object).unwrap_or(&empty);
            let (fields, objects) = compare(o, n, &[]);
            let kind = presence(ot, nt, fields.is_empty() && objects.is_empty());
            let annotations = if kind == DiffType::Edited {
                vec!["forces create/destroy update".to_string()]
            } else {
                Vec::new()
            };
            TaskDiff {
                kind,
                name,
                fields,
                objects,
                annotations,
            }
        })
        .collect::<Vec<_>>();
    let unchanged =
        fields.is_empty() && objects.is_empty() && tasks.iter().all(|t| t.kind == DiffType::None);
    TaskGroupDiff {
        kind: presence(old, new, unchanged),
        name,
        fields,
        objects,
        tasks,
        updates: Default::default(),
    }
}

fn presence(old: Option<&Value>, new: Option<&Value>, unchanged: bool) -> DiffType {
    match (old, new) {
        (None, Some(_)) => DiffType::Added,
        (Some(_), None) => DiffType::Deleted,
        _ if unchanged => DiffType::None,
        _ => DiffType::Edited,
    }
}

/// Pair the named objects of two arrays by their `Name`, in the new array's order, then
/// the deleted ones.
fn by_name<'a>(
    old: Option<&'a Value>,
    new: Option<&'a Value>,
) -> Vec<(String, Option<&'a Value>, Option<&'a Value>)> {
    let list = |v: Option<&'a Value>| -> Vec<&'a Value> {
        v.and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default()
    };
    let name = |v: &Value| v["Name"].as_str().unwrap_or_default().to_string();
    let (old, new) = (list(old), list(new));
    let mut out: Vec<_> = new
        .iter()
        .map(|n| {
            (
                name(n),
                old.iter().copied().find(|o| name(o) == name(n)),
                Some(*n),
            )
        })
        .collect();
    for o in &old {
        if !new.iter().any(|n| name(n) == name(o)) {
            out.push((name(o), Some(*o), None));
        }
    }
    out
}

/// The changed fields and blocks between two objects, leaving out `skip` keys.
fn compare(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    skip: &[&str],
) -> (Vec<FieldDiff>, Vec<ObjectDiff>) {
    let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    let (mut fields, mut objects) = (Vec::new(), Vec::new());
    for k in keys.into_iter().filter(|k| !skip.contains(&k.as_str())) {
        let (o, n) = (
            old.get(k).filter(|v| !is_empty(v)),
            new.get(k).filter(|v| !is_empty(v)),
        );
        if o == n {
            continue;
        }
        let nested = |v: Option<&Value>| matches!(v, Some(Value::Object(_) | Value::Array(_)));
        if nested(o) || nested(n) {
            objects.push(object_diff(k, o, n));
        } else {
            fields.push(field(k.clone(), o, n));
        }
    }
    (fields, objects)
}

fn object_diff(name: &str, old: Option<&Value>, new: Option<&Value>) -> ObjectDiff {
    let kind = presence(old, new, false);
    let as_map = |v: Option<&Value>| -> Map<String, Value> {
        match v {
            Some(Value::Object(m)) => m.clone(),
            // An array's elements by position.
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, x)| (format!("{name}[{i}]"), x.clone()))
                .collect(),
            _ => Map::new(),
        }
    };
    let (fields, objects) = compare(&as_map(old), &as_map(new), &[]);
    ObjectDiff {
        kind,
        name: name.to_string(),
        fields,
        objects,
    }
}

fn field(name: String, old: Option<&Value>, new: Option<&Value>) -> FieldDiff {
    FieldDiff {
        kind: presence(old, new, false),
        name,
        old: old.map(text).unwrap_or_default(),
        new: new.map(text).unwrap_or_default(),
        annotations: Vec::new(),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(v: serde_json::Value) -> Job {
        crate::jobspec::parse_job_json(v.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn edits_additions_and_deletions_are_named_where_they_are() {
        let old = job(
            serde_json::json!({"ID": "j", "Priority": 50, "Meta": {"a": "1"}, "TaskGroups": [
                {"Name": "web", "Count": 1, "Tasks": [{"Name": "t", "Driver": "mock", "Config": {"run_for": "1s"}}]},
                {"Name": "gone", "Tasks": [{"Name": "t", "Driver": "mock"}]}
            ]}),
        );
        let new = job(
            serde_json::json!({"ID": "j", "Priority": 70, "Meta": {"a": "2"}, "TaskGroups": [
                {"Name": "web", "Count": 3, "Tasks": [{"Name": "t", "Driver": "mock", "Config": {"run_for": "2s"}}]},
                {"Name": "new", "Tasks": [{"Name": "t", "Driver": "mock"}]}
            ]}),
        );
        let d = diff(Some(&old), &new);
        assert_eq!(d.kind, DiffType::Edited);
        let priority = d.fields.iter().find(|f| f.name == "Priority").unwrap();
        assert_eq!((priority.old.as_str(), priority.new.as_str()), ("50", "70"));
        let meta = d.objects.iter().find(|o| o.name == "Meta").unwrap();
        assert_eq!(meta.fields[0].name, "a");
        let kinds: Vec<(&str, DiffType)> = d
            .task_groups
            .iter()
            .map(|g| (g.name.as_str(), g.kind))
            .collect();
        assert_eq!(
            kinds,
            [
                ("web", DiffType::Edited),
                ("new", DiffType::Added),
                ("gone", DiffType::Deleted)
            ]
        );
        let web = &d.task_groups[0];
        assert!(
            web.fields
                .iter()
                .any(|f| f.name == "Count" && f.old == "1" && f.new == "3")
        );
        assert_eq!(web.tasks[0].kind, DiffType::Edited);
        assert_eq!(diff(Some(&new), &new).kind, DiffType::None);
        assert_eq!(diff(None, &new).kind, DiffType::Added);
    }
}
