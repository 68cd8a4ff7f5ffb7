#!/usr/bin/env python3
"""What the resource sampler (the UI's charts) costs an agent holding many tasks: the
agent's CPU with N running mock tasks and `telemetry { collection_interval }` at the value
given, against the same with the sampler slowed to once an hour.

    python3 tests/stress/sampler_cost.py target/release/agent N INTERVAL PORT [WINDOWS WINDOW]

e.g. `python3 tests/stress/sampler_cost.py target/release/agent 2000 1s 4791`. BENCHMARKS.md
has the figures.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentproc import call as api, cpu_windows, wait_healthy  # noqa: E402

binary, n, interval, port = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
windows = int(sys.argv[5]) if len(sys.argv) > 5 else 5
window = float(sys.argv[6]) if len(sys.argv) > 6 else 10.0
base = f"http://127.0.0.1:{port}"


def run(every):
    work = tempfile.mkdtemp(prefix="sampler-cost-")
    config = os.path.join(work, "agent.hcl")
    with open(config, "w") as f:
        f.write("client {\n disk_total_mb = 10000000\n memory_total_mb = 10000000\n"
                " cpu_total_compute = 10000000\n max_live_allocs = 100000\n}\n"
                f"telemetry {{\n collection_interval = \"{every}\"\n}}\n")
    agent = subprocess.Popen(
        [binary, "run", "--dev", "--data-dir", os.path.join(work, "data"), "--config", config,
         "--bind", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "agent.log"), "w"))
    call = lambda method, path, body=None: api(base, method, path, body)  # noqa: E731
    try:
        wait_healthy(base)
        for j in range(n // 100):
            call("POST", "/v1/jobs", {"Job": {"ID": f"m{j}", "Type": "service", "TaskGroups": [{
                "Name": "g", "Count": 100, "Tasks": [{"Name": "t", "Driver": "mock",
                "Config": {"run_for": "1h"}, "Resources": {"CPU": 1, "MemoryMB": 1}}]}]}})
        deadline = time.time() + 300
        while True:
            running = call("GET", "/v1/metrics")
            gauges = {g["Name"]: g["Value"] for g in running["Gauges"] if not g.get("Labels", {}).get("status")}
            if gauges.get("nomad.client.allocations.running", 0) >= n:
                break
            if time.time() > deadline:
                raise SystemExit(f"only {gauges.get('nomad.client.allocations.running')} running")
            time.sleep(1)
        time.sleep(5)
        return cpu_windows(agent.pid, windows, window)
    finally:
        agent.terminate()
        agent.wait(timeout=120)
        subprocess.run(["pkill", "-f", work], check=False)
        shutil.rmtree(work, ignore_errors=True)


off = run("1h")
print(f"sampler hourly: {n} mock tasks, agent CPU {off[0]:.2f}% of a core ({[round(x, 2) for x in off[1]]})")
on = run(interval)
print(f"sampler every {interval}: agent CPU {on[0]:.2f}% of a core ({[round(x, 2) for x in on[1]]})")
print(f"the sampler: {on[0] - off[0]:+.2f} points of a core for {n} tasks")
