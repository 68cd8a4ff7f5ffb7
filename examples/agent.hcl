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

# Isolated tasks: namespaces, a chroot, nobody, cgroup limits (needs root and cgroups). The
# host decides the chroot (the task dir with chroot_env and the alloc dir) and refuses the
# users of denied_host_uids (root by default).
plugin "exec" {
  grant {
    process          = ["/usr/bin/*", "/bin/*"]
    isolation        = true
    chroot_env       = ["/bin", "/etc", "/lib", "/lib64", "/sbin", "/usr"]
    denied_host_uids = "0"
    pids_max         = 4096
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
# `variables` for `nomadVar` (a task reads only its own job's nomad/jobs/... paths) and
# `services` for `nomadService`/`nomadServices` (the services of the task's namespace).
plugin "template" {
  grant {
    env       = true
    task_dir  = true
    variables = true
    services  = true
  }
}

# The redis-ping check (a service `check { type = "redis-ping" }`) may connect to loopback
# only: every connect a check component makes is checked against `hosts`.
plugin "redis-ping" {
  grant {
    network {
      hosts = ["127.0.0.1:*"]
    }
  }
}

# Run env-inject for every task.
hook "env-inject" {
  all_tasks = true
}

# What the API's clients and the components together may take (Nomad's `limits` block,
# with the keys a single node adds).
limits {
  http_max_conns_per_client = 100   # connections per client address; past it, 429
  http_read_header_timeout  = "10s" # a request's headers must arrive within this
  guest_memory_mb           = 1024  # linear memory of all component instances together
}
