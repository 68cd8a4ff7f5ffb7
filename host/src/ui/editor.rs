//! `/ui/run`: the job editor, as Nomad's UI has it. The job as HCL or JSON in a text box
//! (a new job starts from an example; `?job=ID&namespace=NS` opens a job's own source when
//! it was submitted as HCL, its JSON otherwise); **Plan** parses it (`/v1/jobs/parse` for
//! HCL) and asks `/v1/job/{id}/plan` for the diff and what the scheduler would do, shown
//! under the box; **Run** registers exactly what was planned, with the plan's modify index
//! as a check-and-set (`EnforceIndex`), and the HCL source as its `Submission`, then opens
//! the job's page. The script calls the API with the viewer's token, so what the token may
//! not do is refused there with the API's own message.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::html;

use super::AppState;
use super::auth::Viewer;
use super::{Tab, error_page, job_href, page};

/// What a new job starts from.
const EXAMPLE: &str = r#"job "example" {
  type = "service"

  group "web" {
    count = 1

    network {
      port "http" {}
    }

    task "server" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "while true; do date; sleep 5; done"]
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
"#;

#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct EditQuery {
    /// A job to edit.
    #[serde(default)]
    job: String,
    #[serde(default)]
    namespace: String,
}

/// `GET /ui/run`.
pub(super) async fn editor(
    State(agent): State<AppState>,
    Query(q): Query<EditQuery>,
    axum::Extension(viewer): axum::Extension<Viewer>,
) -> Response {
    let ns = if q.namespace.is_empty() {
        "default".to_string()
    } else {
        q.namespace
    };
    let (title, source, vars, back) = if q.job.is_empty() {
        (
            "Run a job".to_string(),
            EXAMPLE.to_string(),
            String::new(),
            None,
        )
    } else {
        let Some(job) = agent.server().job(&ns, &q.job) else {
            return error_page(
                StatusCode::NOT_FOUND,
                &format!("No job {:?} in namespace {ns:?}.", q.job),
            );
        };
        if let Err(why) = viewer.check_reads(&agent, &job.namespace) {
            return super::auth::refused(&why, &job_href(&job.namespace, &job.id));
        }
        let hcl = agent
            .server()
            .job_submission(&ns, &job.id, job.state.version)
            .ok()
            .flatten()
            .filter(|s| s.is_hcl());
        let (source, vars) = match hcl {
            // The variables it was run with: its variable file, then its `-var` flags.
            Some(s) => {
                let mut vars = s.variables.clone();
                for (k, v) in s.variable_flags.iter().flatten() {
                    if !vars.is_empty() && !vars.ends_with('\n') {
                        vars.push('\n');
                    }
                    vars.push_str(&format!("{k} = {}\n", serde_json::Value::from(v.as_str())));
                }
                (s.source, vars)
            }
            None => (
                serde_json::to_string_pretty(&serde_json::json!({ "Job": job }))
                    .unwrap_or_default(),
                String::new(),
            ),
        };
        (
            format!("Edit job {}", job.id),
            source,
            vars,
            Some(job_href(&job.namespace, &job.id)),
        )
    };
    let body = html! {
        h1 { (title) }
        @if let Some(b) = &back { p { a href=(b) { "Back to the job" } } }
        form.editor data-editor data-namespace=(ns) {
            label for="job-source" { "Job specification (HCL or JSON)" }
            textarea #job-source name="source" rows="24" spellcheck="false" autocomplete="off" { (source) }
            details open[!vars.is_empty()] {
                summary { "Variables (HCL jobs: " code { "name = value" } " lines, as in a variable file)" }
                textarea #job-vars name="variables" rows="4" spellcheck="false" autocomplete="off" { (vars) }
            }
            div.buttons {
                button type="submit" name="plan" { "Plan" }
                button #run-job type="button" disabled { "Run" }
            }
        }
        p #action-result role="status" aria-live="polite" {}
        section #plan hidden aria-labelledby="plan-h" {
            h2 #plan-h { "Plan" }
            div #plan-result {}
        }
    };
    page(&title, Tab::Jobs, None, body).into_response()
}
