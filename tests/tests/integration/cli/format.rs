//! `-json`, `-t` (Go templates), `-out`/`-template` of the variable commands and
//! `job run -output`, as Nomad's commands offer them: the data each shows is the API's own
//! answer (Nomad's `JobJson` for `job status`), and a bad template or a bad mix of flags is
//! an error naming it, exit 1.

use serde_json::{Value, json};

use super::{cli, write_job};
use crate::harness::{TestAgent, mock_job};

#[tokio::test]
async fn json_and_templates_show_the_apis_data() {
    let t = TestAgent::start("", vec![]).await;
    t.register(mock_job("j", json!({ "run_for": "10ms" })))
        .await;
    let allocs = t
        .wait_allocs("j", std::time::Duration::from_secs(30), |a| {
            a.iter().any(|a| a["ClientStatus"] == "complete")
        })
        .await;
    let alloc = allocs[0]["ID"].as_str().unwrap().to_string();
    let ok = async |args: &[&str]| {
        let out = cli(&t, args).await;
        assert_eq!(out.code, 0, "{args:?}: {out:?}");
        out.stdout
    };

    // `job status`: Nomad's JobJson per job, for one job and for the list.
    let one: Value = serde_json::from_str(&ok(&["job", "status", "-json", "j"]).await).unwrap();
    let first = &one[0];
    for key in ["Summary", "Allocations", "LatestDeployment", "Evaluations"] {
        assert!(first.get(key).is_some(), "{key} missing: {one}");
    }
    assert_eq!(first["Summary"]["JobID"], "j");
    assert_eq!(first["Allocations"][0]["ID"], alloc.as_str());
    assert_eq!(
        ok(&[
            "job",
            "status",
            "-t",
            "{{range .}}{{.Summary.JobID}}:{{len .Allocations}}{{end}}"
        ])
        .await,
        "j:1"
    );
    assert_eq!(
        ok(&[
            "job",
            "inspect",
            "-t",
            "{{.ID}} {{(index .TaskGroups 0).Name}}",
            "j"
        ])
        .await,
        "j g"
    );
    // Plain `job inspect` wraps the job as `job run` takes it back; `-json` is the job.
    let wrapped: Value = serde_json::from_str(&ok(&["job", "inspect", "j"]).await).unwrap();
    assert_eq!(wrapped["Job"]["ID"], "j");
    let bare: Value = serde_json::from_str(&ok(&["job", "inspect", "-json", "j"]).await).unwrap();
    assert_eq!(bare["ID"], "j");
    assert_eq!(
        ok(&[
            "alloc",
            "status",
            "-t",
            "{{.ClientStatus}} {{.TaskGroup}}",
            &alloc
        ])
        .await,
        "complete g"
    );
    assert_eq!(
        ok(&["job", "allocs", "-t", "{{range .}}{{.ID}}{{end}}", "j"]).await,
        alloc
    );
    assert_eq!(
        ok(&[
            "job",
            "history",
            "-t",
            "{{range .}}v{{.Version}}{{end}}",
            "j"
        ])
        .await,
        "v0"
    );
    assert!(
        ok(&["eval", "list", "-t", "{{range .}}{{.TriggeredBy}} {{end}}"])
            .await
            .contains("job-register"),
    );
    let node = ok(&["node", "status", "-t", "{{range .}}{{.Status}}{{end}}"]).await;
    assert_eq!(node, "ready");
    // Templates see Go's builtins: printf, len, index, eq.
    assert_eq!(
        ok(&["alloc", "status", "-t", r#"{{printf "%s/%s %d" .JobID .TaskGroup (len .TaskStates)}}{{if eq .ClientStatus "complete"}} done{{end}}"#, &alloc]).await,
        "j/g 1 done"
    );

    // The operator's basics: the one raft peer, the metrics in each format.
    let peers = ok(&["operator", "raft", "list-peers"]).await;
    assert!(
        peers.starts_with("Node") && peers.contains("leader") && peers.contains("true"),
        "{peers}"
    );
    let prom = ok(&["operator", "metrics", "-format", "prometheus"]).await;
    assert!(
        prom.contains("# TYPE nomad_client_allocations_running gauge"),
        "{prom}"
    );
    let summary: Value = serde_json::from_str(&ok(&["operator", "metrics"]).await).unwrap();
    assert!(
        summary["Gauges"].as_array().is_some_and(|g| !g.is_empty()),
        "{summary}"
    );
    let gauges = ok(&["operator", "metrics", "-t", "{{range .Gauges}}{{if eq .Name \"nomad.client.allocations.terminal\"}}{{.Value}}{{end}}{{end}}"]).await;
    assert_eq!(gauges, "1", "one allocation ended");

    // Mistakes are named, exit 1, nothing on stdout.
    for (args, says) in [
        (
            vec!["job", "status", "-json", "-t", "{{.}}", "j"],
            "Both json and template formatting are not allowed",
        ),
        (
            vec!["alloc", "status", "-t", "{{.ClientStatus", &alloc],
            "Error formatting the data",
        ),
        (
            vec!["job", "inspect", "-t", "{{.ID | nosuchfunc}}", "j"],
            "Error formatting the data",
        ),
    ] {
        let out = cli(&t, &args).await;
        assert_eq!(out.code, 1, "{args:?}: {out:?}");
        assert!(out.stderr.contains(says), "{args:?}: {out:?}");
        assert!(out.stdout.is_empty(), "{args:?}: {out:?}");
    }
}

#[tokio::test]
async fn variables_print_as_nomads_out_formats_and_job_run_output_submits_nothing() {
    let t = TestAgent::start("", vec![]).await;
    let ok = async |args: &[&str]| {
        let out = cli(&t, args).await;
        assert_eq!(out.code, 0, "{args:?}: {out:?}");
        out.stdout
    };
    ok(&["var", "put", "app/db", "user=admin", "password=s3cret"]).await;

    // Redirected (as here), `var get` prints JSON, as Nomad's does off a terminal.
    let v: Value = serde_json::from_str(&ok(&["var", "get", "app/db"]).await).unwrap();
    assert_eq!(v["Items"]["user"], "admin");
    let table = ok(&["var", "get", "-out", "table", "app/db"]).await;
    assert!(
        table.contains("Path        = app/db") && table.contains("user     = admin"),
        "{table}"
    );
    let hcl = ok(&["var", "get", "-out", "hcl", "app/db"]).await;
    assert!(hcl.contains(r#"path         = "app/db""#), "{hcl}");
    assert!(
        hcl.contains(r#"      user = "admin""#) && hcl.contains(r#"  password = "s3cret""#),
        "{hcl}"
    );
    assert_eq!(
        ok(&[
            "var",
            "get",
            "-out",
            "go-template",
            "-template",
            "{{.Items.user}}@{{.Path}}",
            "app/db"
        ])
        .await,
        "admin@app/db"
    );
    assert_eq!(ok(&["var", "get", "-out", "none", "app/db"]).await, "");
    // `-item` prints the value alone, no newline, for pipes.
    assert_eq!(
        ok(&["var", "get", "-item", "password", "app/db"]).await,
        "s3cret"
    );
    let list: Value = serde_json::from_str(&ok(&["var", "list"]).await).unwrap();
    assert_eq!(list[0]["Path"], "app/db");
    assert_eq!(ok(&["var", "list", "-out", "terse"]).await.trim(), "app/db");
    assert_eq!(
        ok(&[
            "var",
            "list",
            "-out",
            "go-template",
            "-template",
            "{{range .}}{{.Path}};{{end}}"
        ])
        .await,
        "app/db;"
    );
    for (args, says) in [
        (
            vec!["var", "get", "-template", "{{.Path}}", "app/db"],
            "The '-template' flag is only valid when using 'go-template' formatting",
        ),
        (
            vec!["var", "get", "-out", "go-template", "app/db"],
            "A template must be supplied using '-template'",
        ),
        (
            vec!["var", "get", "-out", "yaml", "app/db"],
            r#"Invalid value for "-out"; valid values are [go-template, hcl, json, none, table]"#,
        ),
        (
            vec!["var", "list", "-out", "hcl"],
            r#"Invalid value for "-out"; valid values are [go-template, json, table, terse]"#,
        ),
        (
            vec!["var", "get", "-item", "nope", "app/db"],
            r#"Variable does not contain "nope" item"#,
        ),
    ] {
        let out = cli(&t, &args).await;
        assert_eq!(out.code, 1, "{args:?}: {out:?}");
        assert!(out.stderr.contains(says), "{args:?}: {out:?}");
    }

    // `job run -output`: the request `job run` would send, and nothing is registered.
    let dir = tempfile::tempdir().unwrap();
    let hcl_job = dir.path().join("j.nomad.hcl");
    std::fs::write(
        &hcl_job,
        "variable \"n\" { default = 1 }\njob \"out\" {\n  group \"g\" {\n    count = var.n\n    task \"t\" {\n      driver = \"mock\"\n    }\n  }\n}\n",
    )
    .unwrap();
    let printed: Value = serde_json::from_str(
        &ok(&[
            "job",
            "run",
            "-output",
            "-var",
            "n=3",
            hcl_job.to_str().unwrap(),
        ])
        .await,
    )
    .unwrap();
    assert_eq!(printed["Job"]["ID"], "out");
    assert_eq!(printed["Job"]["TaskGroups"][0]["Count"], 3);
    let json_job = write_job(
        dir.path(),
        "k.json",
        json!({ "ID": "k", "TaskGroups": [{ "Name": "g", "Tasks": [{ "Name": "t", "Driver": "mock" }] }] }),
    );
    let printed: Value =
        serde_json::from_str(&ok(&["job", "run", "-output", &json_job]).await).unwrap();
    assert_eq!(printed["Job"]["ID"], "k");
    let r = reqwest::get(t.url("/v1/job/out")).await.unwrap();
    assert_eq!(r.status(), 404, "-output registered the job");
}
