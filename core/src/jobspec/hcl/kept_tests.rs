//! The blocks Paddock keeps without acting on them: the same job in HCL and in Nomad's JSON
//! reads back the same, and each block is named in a warning.

use serde_json::json;

use super::parse_job_hcl;
use crate::jobspec::{parse_job_json, unacted};

/// A service job as Nomad's docs write one, with the blocks a single node does not act on.
const WEB: &str = r#"
job "web" {
  datacenters = ["dc1"]
  all_at_once = false
  update {
    max_parallel     = 1
    canary           = 1
    auto_revert      = true
    min_healthy_time = "10s"
  }
  group "web" {
    count = 2
    reschedule {
      delay          = "30s"
      delay_function = "exponential"
      max_delay      = "1h"
      unlimited      = true
    }
    volume "data" {
      type      = "host"
      source    = "data"
      read_only = false
    }
    network {
      port "http" { to = 8080 }
    }
    service {
      name = "web"
      port = "http"
      tags = ["a"]
      check {
        type     = "http"
        path     = "/health"
        interval = "10s"
        timeout  = "2s"
        header {
          X-Probe = ["paddock"]
        }
        check_restart {
          limit = 3
          grace = "90s"
        }
      }
    }
    spread {
      attribute = "${node.datacenter}"
      target "dc1" { percent = 100 }
    }
    task "server" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["60"]
      }
      artifact {
        source      = "https://example.com/app.tar.gz"
        destination = "local/app"
        options {
          checksum = "sha256:abababababababababababababababababababababababababababababababab"
        }
      }
      volume_mount {
        volume      = "data"
        destination = "/data"
      }
      template {
        data        = "x"
        destination = "local/x"
        wait {
          min = "2s"
          max = "10s"
        }
      }
      action "hello" {
        command = "/bin/echo"
        args    = ["hi"]
      }
    }
  }
}
"#;

fn web_json() -> serde_json::Value {
    json!({
        "ID": "web", "Datacenters": ["dc1"], "AllAtOnce": false,
        "Update": {"MaxParallel": 1, "Canary": 1, "AutoRevert": true, "MinHealthyTime": 10_000_000_000u64},
        "TaskGroups": [{
            "Name": "web", "Count": 2,
            "ReschedulePolicy": {"Delay": 30_000_000_000u64, "DelayFunction": "exponential",
                "MaxDelay": 3_600_000_000_000u64, "Unlimited": true},
            "Volumes": {"data": {"Name": "data", "Type": "host", "Source": "data", "ReadOnly": false}},
            "Networks": [{"DynamicPorts": [{"Label": "http", "To": 8080}]}],
            "Services": [{"Name": "web", "PortLabel": "http", "Tags": ["a"], "Checks": [{
                "Type": "http", "Path": "/health", "Interval": 10_000_000_000u64,
                "Timeout": 2_000_000_000u64, "Header": {"X-Probe": ["paddock"]},
                "CheckRestart": {"Limit": 3, "Grace": 90_000_000_000u64}}]}],
            "Spreads": [{"Attribute": "${node.datacenter}",
                "SpreadTarget": [{"Value": "dc1", "Percent": 100}]}],
            "Tasks": [{
                "Name": "server", "Driver": "raw_exec",
                "Config": {"command": "/bin/sleep", "args": ["60"]},
                "Artifacts": [{"GetterSource": "https://example.com/app.tar.gz",
                    "RelativeDest": "local/app", "GetterOptions": {"checksum": "sha256:abababababababababababababababababababababababababababababababab"}}],
                "VolumeMounts": [{"Volume": "data", "Destination": "/data"}],
                "Templates": [{"EmbeddedTmpl": "x", "DestPath": "local/x",
                    "Wait": {"Min": 2_000_000_000u64, "Max": 10_000_000_000u64}}],
                "Actions": [{"Name": "hello", "Command": "/bin/echo", "Args": ["hi"]}],
            }],
        }],
    })
}

#[test]
fn the_kept_blocks_read_back_from_hcl_as_from_nomads_json() {
    let hcl = parse_job_hcl(WEB).unwrap();
    let json = parse_job_json(web_json().to_string().as_bytes()).unwrap();
    assert_eq!(hcl.kept, json.kept);
    let (hg, jg) = (&hcl.task_groups[0], &json.task_groups[0]);
    assert_eq!(hg.kept, jg.kept);
    assert_eq!(hg.tasks[0].kept, jg.tasks[0].kept);
    assert_eq!(hg.tasks[0].templates[0].kept, jg.tasks[0].templates[0].kept);
    assert_eq!(hcl, json, "the whole job differs");
}

#[test]
fn each_block_not_acted_on_is_named_with_its_path() {
    let job = parse_job_hcl(WEB).unwrap();
    let paths: Vec<String> = unacted(&job).into_iter().map(|u| u.path).collect();
    assert_eq!(
        paths,
        [
            "Job.TaskGroups[0].Spreads",
            "Job.TaskGroups[0].Services[0].Provider",
            "Job.TaskGroups[0].Tasks[0].Actions",
        ],
        "`AllAtOnce = false` asks for nothing, so it is not named; a service job's \
         `Update` is acted on (its groups' deployments)"
    );
}

#[test]
fn a_kept_block_in_the_wrong_shape_is_an_error_at_its_line() {
    let src = WEB.replace("all_at_once = false", "all_at_once {\n  }");
    let e = parse_job_hcl(&src).unwrap_err();
    assert_eq!(e.path, "job.all_at_once (line 4)");
    assert!(e.message.contains("attribute"), "{e}");
    let src = WEB.replace("volume \"data\" {", "volume {");
    let e = parse_job_hcl(&src).unwrap_err();
    assert!(e.message.contains("needs a label"), "{e}");
    let src = WEB.replace("min_healthy_time = \"10s\"", "min_healthy_time = \"soon\"");
    let e = parse_job_hcl(&src).unwrap_err();
    assert!(e.path.starts_with("job.update.min_healthy_time"), "{e}");
}
