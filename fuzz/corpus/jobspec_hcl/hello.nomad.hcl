# The same job as hello.json, in Nomad's HCL: cargo run -- job run examples/jobs/hello.nomad.hcl
job "hello-hcl" {
  type        = "batch"
  datacenters = ["dc1"]

  group "greeters" {
    count = 2

    task "greet" {
      driver = "mock"
      config {
        run_for   = "2s"
        exit_code = 0
      }
      env {
        GREETING = "hello from ${NOMAD_ALLOC_NAME} on ${attr.kernel.name}"
      }
      resources {
        cpu    = 100
        memory = 64
      }
    }

    task "sidekick" {
      driver = "mock"
      config {
        run_for = "1s"
      }
    }
  }
}
