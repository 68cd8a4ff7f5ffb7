# Agent config, shaped like Nomad's. Run with: cargo run -- run --config examples/agent.hcl
data_dir   = "/tmp/paddock-data"
bind_addr  = "127.0.0.1"
log_level  = "info"
datacenter = "dc1"

ports {
  http = 4646
}

client {
  meta = {
    rack = "r1"
  }
}

# Components are granted nothing unless a block here says so.
plugin "mock" {
  grant {
    env    = true
    events = true
  }
  limits {
    memory_mb    = 64
    call_timeout = "10s"
  }
}

plugin "raw_exec" {
  grant {
    process = ["/usr/bin/*", "/bin/*"]
  }
  limits {
    call_timeout = "5s"
  }
}

# Isolated tasks: namespaces, a chroot, nobody, cgroup limits (needs root and cgroups).
plugin "exec" {
  grant {
    process   = ["/usr/bin/*", "/bin/*"]
    isolation = true
  }
  config {
    default_user = "nobody"
  }
}

plugin "env-inject" {
  grant {
    env = true
  }
  config {
    env = {
      GREETING = "hello from ${NOMAD_TASK_NAME} on ${attr.kernel.name}"
    }
  }
}

# The template hook renders tasks' `template` blocks; it needs the task dir and the env,
# and `variables` for `nomadVar` (a task reads only its own job's nomad/jobs/... paths).
plugin "template" {
  grant {
    env       = true
    task_dir  = true
    variables = true
  }
}

# Run env-inject for every task.
hook "env-inject" {
  all_tasks = true
}
