#!/usr/bin/env python3
"""Agent memory under job churn, with the client's and the server's garbage collection.

Starts the agent binary given, then CYCLES times: registers a batch job of one short mock
task, waits until its allocation ended, and purges the job. Prints the agent's RSS (MiB,
from /proc/PID/status) at eight points, then how many allocation directories and
allocation records are left.

    python3 tests/stress/gc_memory.py target/release/agent '<client keys>|<server keys>' CYCLES PORT

The second argument holds extra lines for the `client { }` block, then `|`, then lines for
a `server { }` block, e.g. 'gc_max_allocs = 100000' (no client collection) or
'|eval_gc_threshold = "10s"' (records kept 10 s). BENCHMARKS.md has the figures.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

binary, extra, cycles, port = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
client_keys, _, server_keys = extra.partition("|")
work = tempfile.mkdtemp(prefix="gc-memory-")
config = (
    "client {\n disk_total_mb = 1000000\n memory_total_mb = 1000000\n"
    f" cpu_total_compute = 1000000\n {client_keys}\n}}\n"
)
if server_keys:
    config += f"server {{\n{server_keys}\n}}\n"
with open(f"{work}/agent.hcl", "w") as f:
    f.write(config)
agent = subprocess.Popen(
    [binary, "run", "--dev", "--data-dir", f"{work}/data",
     "--bind", f"127.0.0.1:{port}", "--config", f"{work}/agent.hcl"],
    stdout=open(f"{work}/agent.log", "w"), stderr=subprocess.STDOUT)
base = f"http://127.0.0.1:{port}"


def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, method=method, data=data)
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"null")


def rss_mib():
    with open(f"/proc/{agent.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return round(int(line.split()[1]) / 1024, 1)


try:
    for _ in range(600):
        try:
            call("GET", "/v1/agent/health")
            break
        except OSError:
            time.sleep(0.2)
    samples = []
    step = max(cycles // 8, 1)
    for i in range(cycles):
        if i % step == 0:
            samples.append((i, rss_mib()))
        job = f"j{i}"
        call("POST", "/v1/jobs", {"Job": {"ID": job, "Type": "batch", "TaskGroups": [{
            "Name": "g", "Tasks": [{"Name": "t", "Driver": "mock",
                                    "Config": {"run_for": "1ms", "stdout_string": "x" * 200}}]}]}})
        while True:
            allocs = call("GET", f"/v1/job/{job}/allocations")
            if allocs and all(a["ClientStatus"] in ("complete", "failed") for a in allocs):
                break
            time.sleep(0.01)
        call("DELETE", f"/v1/job/{job}?purge=true")
    samples.append((cycles, rss_mib()))
    time.sleep(2)
    samples.append(("end+2s", rss_mib()))
    dirs = len(os.listdir(f"{work}/data/alloc"))
    records = len(call("GET", "/v1/allocations"))
    print(extra or "defaults", samples, "alloc dirs:", dirs, "records:", records)
finally:
    agent.terminate()
    agent.wait()
    shutil.rmtree(work)
