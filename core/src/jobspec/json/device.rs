//! A task's `Resources.Devices[]` (Nomad's `RequestedDevice`): `Name`, `Count`, and the
//! `Constraints` and `Affinities` placement applies to the node's device groups, checked
//! as Nomad's `RequestedDevice.Validate` checks them, and more: an unknown operator, a
//! target that is not a `${device.*}` one, a bad regexp or a number with an unknown unit
//! (`4 GiBs`) is an error naming its field.

use serde_json::Value;

use super::R;
use super::obj::Obj;
use crate::constraint::{attribute, device as rules};
use crate::jobspec::{
    AFFINITY_OPERATORS, CONSTRAINT_OPERATORS, DeviceAffinity, DeviceConstraint, DeviceRequest,
    JobspecError,
};

pub(super) fn request_from(path: String, v: &Value) -> R<DeviceRequest> {
    let mut d = Obj::new(path.clone(), v)?;
    let name = d.required_string("Name")?;
    let count = d.u32("Count")?.unwrap_or(1);
    let mut constraints = Vec::new();
    for (j, c) in d.array("Constraints")?.into_iter().enumerate() {
        let cpath = format!("{path}.Constraints[{j}]");
        let mut o = Obj::new(cpath.clone(), c)?;
        let c = DeviceConstraint {
            ltarget: o.string("LTarget")?.unwrap_or_default(),
            rtarget: o.string("RTarget")?.unwrap_or_default(),
            operand: o.string("Operand")?.unwrap_or_default(),
        };
        o.finish(&[])?;
        check(
            &cpath,
            &c.ltarget,
            &c.operand,
            &c.rtarget,
            CONSTRAINT_OPERATORS,
        )?;
        constraints.push(c);
    }
    let mut affinities = Vec::new();
    for (j, a) in d.array("Affinities")?.into_iter().enumerate() {
        let apath = format!("{path}.Affinities[{j}]");
        let mut o = Obj::new(apath.clone(), a)?;
        let ltarget = o.string("LTarget")?.unwrap_or_default();
        let rtarget = o.string("RTarget")?.unwrap_or_default();
        let operand = o.string("Operand")?.unwrap_or_default();
        // Nomad's API gives an affinity without a weight 50.
        let weight = match o.get("Weight") {
            None => 50,
            Some(Value::Number(n)) => match n.as_i64() {
                Some(w) if w != 0 && (-100..=100).contains(&w) => w as i8,
                _ => {
                    return Err(JobspecError::new(
                        format!("{apath}.Weight"),
                        format!("must be a non-zero integer from -100 to 100, found {n}"),
                    ));
                }
            },
            Some(other) => {
                return Err(JobspecError::new(
                    format!("{apath}.Weight"),
                    format!("expected an integer, found {}", super::obj::kind(other)),
                ));
            }
        };
        o.finish(&[])?;
        check(&apath, &ltarget, &operand, &rtarget, AFFINITY_OPERATORS)?;
        affinities.push(DeviceAffinity {
            ltarget,
            rtarget,
            operand,
            weight,
        });
    }
    d.finish(&[])?;
    Ok(DeviceRequest {
        name,
        count,
        constraints,
        affinities,
    })
}

/// One rule's operator, targets and value, naming the field at fault under `path`.
fn check(path: &str, l: &str, op: &str, r: &str, operators: &[&str]) -> R<()> {
    let err = |field: &str, msg: String| Err(JobspecError::new(format!("{path}.{field}"), msg));
    if op.is_empty() {
        return err("Operand", "missing operator".into());
    }
    if !operators.contains(&op) {
        return err(
            "Operand",
            format!(
                "unknown operator {op:?} (expected one of {})",
                operators.join(", ")
            ),
        );
    }
    if l.is_empty() {
        return err("LTarget", "missing attribute".into());
    }
    for (field, t) in [("LTarget", l), ("RTarget", r)] {
        if !rules::known_target(t) {
            return err(
                field,
                format!(
                    "{t:?} is not a device target (use ${{device.vendor}}, ${{device.type}}, \
                     ${{device.model}}, ${{device.ids}} or ${{device.attr.<name>}})"
                ),
            );
        }
    }
    match op {
        "is_set" | "is_not_set" => {
            if !r.is_empty() {
                return err("RTarget", format!("operator {op:?} takes no value"));
            }
        }
        _ if r.is_empty() => return err("RTarget", format!("operator {op:?} needs a value")),
        "regexp" => {
            if let Err(e) = regex::Regex::new(r) {
                return err("RTarget", format!("invalid regexp: {e}"));
            }
        }
        "version" | "semver" => {
            let parts_ok = r.split(',').all(|c| {
                let v = c
                    .trim()
                    .trim_start_matches(['~', '>', '<', '=', '!'])
                    .trim()
                    .trim_start_matches('v');
                v.starts_with(|c: char| c.is_ascii_digit())
            });
            if !parts_ok {
                return err("RTarget", format!("invalid version constraint {r:?}"));
            }
        }
        _ => {
            for (field, t) in [("LTarget", l), ("RTarget", r)] {
                if let Some(unit) = attribute::unknown_unit(t) {
                    return err(
                        field,
                        format!(
                            "{t:?} has an unknown unit {unit:?} (units: {})",
                            attribute::unit_names()
                        ),
                    );
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::jobspec::parse_job_json;

    /// A job whose one task asks for `device`.
    fn job(device: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"ID": "j", "TaskGroups": [{"Name": "g", "Tasks": [
            {"Name": "t", "Driver": "mock", "Resources": {"Devices": [device]}}]}]}))
        .unwrap()
    }

    const AT: &str = "Job.TaskGroups[0].Tasks[0].Resources.Devices[0]";

    #[test]
    fn constraints_and_affinities_are_read_with_nomads_defaults() {
        let j = parse_job_json(&job(json!({"Name": "acme/gpu", "Count": 2,
            "Constraints": [{"LTarget": "${device.attr.memory}", "RTarget": "4 GiB", "Operand": ">="}],
            "Affinities": [{"LTarget": "${device.model}", "RTarget": "a100", "Operand": "="},
                           {"LTarget": "${device.model}", "RTarget": "t4", "Operand": "=", "Weight": -20}]})))
        .unwrap();
        let d = &j.task_groups[0].tasks[0].resources.devices[0];
        assert_eq!((d.name.as_str(), d.count), ("acme/gpu", 2));
        assert_eq!(
            d.constraints[0].describe(),
            "${device.attr.memory} >= 4 GiB"
        );
        assert_eq!(d.affinities[0].weight, 50);
        assert_eq!(d.affinities[1].weight, -20);
    }

    #[test]
    fn bad_rules_name_their_field() {
        let c = |l: &str, op: &str, r: &str| {
            job(
                json!({"Name": "gpu", "Constraints": [{"LTarget": l, "RTarget": r, "Operand": op}]}),
            )
        };
        for (body, field, says) in [
            (
                c("${device.model}", "~=", "a100"),
                "Constraints[0].Operand",
                "unknown operator",
            ),
            (
                c("${device.model}", "", "a100"),
                "Constraints[0].Operand",
                "missing operator",
            ),
            (
                c("${device.model}", "distinct_hosts", "true"),
                "Constraints[0].Operand",
                "unknown operator",
            ),
            (
                c("${device.attr.memory}", ">=", "4 GiBs"),
                "Constraints[0].RTarget",
                "unknown unit \"GiBs\"",
            ),
            (
                c("${attr.kernel.name}", "=", "linux"),
                "Constraints[0].LTarget",
                "not a device target",
            ),
            (
                c("${device.model}", "regexp", "(a"),
                "Constraints[0].RTarget",
                "invalid regexp",
            ),
            (
                c("${device.model}", "=", ""),
                "Constraints[0].RTarget",
                "needs a value",
            ),
            (
                c("${device.model}", "is_set", "x"),
                "Constraints[0].RTarget",
                "takes no value",
            ),
            (
                c("${device.attr.v}", "version", "newest"),
                "Constraints[0].RTarget",
                "invalid version",
            ),
            (
                c("", "=", "x"),
                "Constraints[0].LTarget",
                "missing attribute",
            ),
            (
                job(
                    json!({"Name": "gpu", "Affinities": [{"LTarget": "${device.model}", "RTarget": "a", "Operand": "=", "Weight": 0}]}),
                ),
                "Affinities[0].Weight",
                "non-zero",
            ),
            (
                job(
                    json!({"Name": "gpu", "Affinities": [{"LTarget": "${device.model}", "RTarget": "a", "Operand": "=", "Weight": 101}]}),
                ),
                "Affinities[0].Weight",
                "-100 to 100",
            ),
            (
                job(
                    json!({"Name": "gpu", "Affinities": [{"LTarget": "${device.model}", "RTarget": "", "Operand": "is_set"}]}),
                ),
                "Affinities[0].Operand",
                "unknown operator",
            ),
            (
                job(
                    json!({"Name": "gpu", "Constraints": [{"LTarget": "${device.model}", "RTarget": "a", "Operand": "=", "Weight": 1}]}),
                ),
                "Constraints[0].Weight",
                "unknown field",
            ),
        ] {
            let e = parse_job_json(&body).unwrap_err();
            assert_eq!(e.path, format!("{AT}.{field}"), "{e}");
            assert!(e.message.contains(says), "{e}");
        }
        // Literals on both sides, versions and id sets are fine.
        for ok in [
            c("${device.attr.driver}", "version", ">= 535.0, < 600"),
            c("${device.ids}", "set_contains_any", "g0,g1"),
            c("${device.attr.memory}", "<", "80GiB"),
            c("${device.attr.nope}", "is_not_set", ""),
        ] {
            parse_job_json(&ok).unwrap();
        }
    }
}
