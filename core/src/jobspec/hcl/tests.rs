//! HCL job files through the whole jobspec: paths and lines in errors, networks,
//! variables and templates.

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
fn nomad_var_environment_values_sit_under_flags_and_skip_undeclared_names() {
    let env: BTreeMap<String, String> = [("region", "ap"), ("n", "4"), ("other_jobs", "x")]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into();
    let job = parse_job_hcl_with_env(WITH_VARS, &BTreeMap::new(), &env).unwrap();
    assert_eq!((job.region.as_str(), job.task_groups[0].count), ("ap", 4));
    let flags: BTreeMap<String, String> = [("region".to_string(), "us".to_string())].into();
    let job = parse_job_hcl_with_env(WITH_VARS, &flags, &env).unwrap();
    assert_eq!((job.region.as_str(), job.task_groups[0].count), ("us", 4));
    // A variable with no default takes its value from the environment alone.
    let no_default = WITH_VARS.replace("  default = 2\n", "");
    let job = parse_job_hcl_with_env(&no_default, &BTreeMap::new(), &env).unwrap();
    assert_eq!(job.task_groups[0].count, 4);
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

#[test]
fn device_blocks_carry_their_constraints_and_affinities() {
    let src = r#"
job "gpu" {
  group "g" {
    task "t" {
      driver = "mock"
      resources {
        device "acme/gpu" {
          count = 2
          constraint {
            attribute = "${device.attr.memory}"
            operator  = ">="
            value     = "4 GiB"
          }
          constraint {
            attribute = "${device.model}"
            regexp    = "^a"
          }
          affinity {
            attribute = "${device.model}"
            value     = "a100"
            weight    = -30
          }
          affinity {
            attribute        = "${device.attr.cuda}"
            set_contains_any = "sm80,sm90"
          }
        }
      }
    }
  }
}
"#;
    let job = parse_job_hcl(src).unwrap();
    let d = &job.task_groups[0].tasks[0].resources.devices[0];
    assert_eq!(d.count, 2);
    let c: Vec<String> = d.constraints.iter().map(|c| c.describe()).collect();
    assert_eq!(
        c,
        [
            "${device.attr.memory} >= 4 GiB",
            "${device.model} regexp ^a"
        ]
    );
    assert_eq!(d.affinities[0].operand, "=");
    assert_eq!(d.affinities[0].weight, -30);
    assert_eq!(d.affinities[1].operand, "set_contains_any");
    assert_eq!(d.affinities[1].rtarget, "sm80,sm90");
    assert_eq!(d.affinities[1].weight, 50);
    let bad = src.replace("\">=\"", "\"~=\"");
    let e = parse_job_hcl(&bad).unwrap_err();
    assert!(e.message.contains("unknown operator"), "{e}");
}
