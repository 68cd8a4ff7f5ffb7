//! A register request's `Submission` (Nomad's `api.JobSubmission`): the job file's source
//! and the variables given with it.

use serde_json::Value;

use super::R;
use super::obj::Obj;
use crate::jobspec::JobspecError;
use crate::jobspec::submission::JobSubmission;

/// Read `Submission` (`null` or absent: none). `Namespace`, `JobID`, `Version` and
/// `JobModifyIndex` are the agent's to set, as in Nomad: taken and ignored, so that what
/// `GET /v1/job/{id}/submission` answered can be sent back as it is.
pub(super) fn submission_from_value(v: Option<&Value>) -> R<Option<JobSubmission>> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let mut o = Obj::new("Submission".into(), v)?;
    let source = o.string("Source")?.unwrap_or_default();
    let format = o.string("Format")?.unwrap_or_default();
    let variables = o.string("Variables")?.unwrap_or_default();
    // Nomad's Canonicalize: no flags is `null`.
    let flags = o.string_map("VariableFlags")?;
    let variable_flags = (!flags.is_empty()).then_some(flags);
    o.finish(&["Namespace", "JobID", "Version", "JobModifyIndex"])?;
    if format.is_empty() && !source.is_empty() {
        return Err(JobspecError::new(
            "Submission.Format",
            "missing: the source's format (\"hcl2\", \"hcl1\" or \"json\")",
        ));
    }
    Ok(Some(JobSubmission {
        source,
        format,
        variable_flags,
        variables,
        ..Default::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobspec::parse_register_request;

    fn job() -> Value {
        serde_json::json!({ "ID": "x", "TaskGroups": [{ "Name": "g",
            "Tasks": [{ "Name": "t", "Driver": "mock" }] }] })
    }

    #[test]
    fn a_submission_is_read_with_the_job() {
        let body = serde_json::json!({ "Job": job(), "Submission": {
            "Source": "job \"x\" {}", "Format": "hcl2",
            "VariableFlags": { "X": "1" }, "Variables": "Y = 2\n",
            "Namespace": "ignored", "JobID": "ignored", "Version": 9, "JobModifyIndex": 9 } });
        let req = parse_register_request(body.to_string().as_bytes()).unwrap();
        let s = req.submission.unwrap();
        assert_eq!(s.source, "job \"x\" {}");
        assert_eq!(s.format, "hcl2");
        assert_eq!(s.variable_flags.unwrap()["X"], "1");
        assert_eq!(s.variables, "Y = 2\n");
        assert_eq!(
            (s.namespace.as_str(), s.job_id.as_str(), s.version),
            ("", "", 0)
        );
    }

    #[test]
    fn no_submission_and_a_null_one_are_none() {
        for body in [
            serde_json::json!({ "Job": job() }),
            serde_json::json!({ "Job": job(), "Submission": null }),
        ] {
            let req = parse_register_request(body.to_string().as_bytes()).unwrap();
            assert!(req.submission.is_none());
        }
    }

    #[test]
    fn a_bad_submission_names_its_field() {
        for (sub, field) in [
            (
                serde_json::json!({ "Source": 3, "Format": "hcl2" }),
                "Submission.Source",
            ),
            (serde_json::json!({ "Source": "x" }), "Submission.Format"),
            (
                serde_json::json!({ "Source": "x", "Format": "hcl2", "VariableFlags": { "X": 1 } }),
                "Submission.VariableFlags.X",
            ),
            (
                serde_json::json!({ "Source": "x", "Format": "hcl2", "Sauce": "x" }),
                "Submission.Sauce",
            ),
            (serde_json::json!("job {}"), "Submission"),
        ] {
            let body = serde_json::json!({ "Job": job(), "Submission": sub });
            let e = parse_register_request(body.to_string().as_bytes()).unwrap_err();
            assert!(e.to_string().starts_with(field), "{field}: {e}");
        }
    }
}
