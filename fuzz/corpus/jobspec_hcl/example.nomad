# The job `nomad init` writes for upstream's CI, with its Docker task swapped for a
# raw_exec one: job "example", group "cache", task "redis". The task is a shell that
# stays up and survives SIGUSR1 and SIGHUP (test_client.py signals it).
job "example" {
  datacenters = ["dc1"]

  update {
    max_parallel      = 1
    min_healthy_time  = "10s"
    healthy_deadline  = "3m"
    progress_deadline = "10m"
    auto_revert       = false
    canary            = 0
  }

  migrate {
    max_parallel     = 1
    health_check     = "checks"
    min_healthy_time = "10s"
    healthy_deadline = "5m"
  }

  group "cache" {
    count = 1

    network {
      port "db" {
        to = 6379
      }
    }

    restart {
      attempts = 2
      interval = "30m"
      delay    = "15s"
      mode     = "fail"
    }

    ephemeral_disk {
      size = 300
    }

    task "redis" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "trap 'echo got USR1' USR1; trap 'echo got HUP' HUP; echo ready; while :; do sleep 1; done"]
      }

      resources {
        cpu    = 500
        memory = 256
      }
    }
  }
}
