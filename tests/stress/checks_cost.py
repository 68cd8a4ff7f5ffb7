#!/usr/bin/env python3
"""What a node's service checks cost the agent: its CPU and RSS with N services whose HTTP
checks run every INTERVAL seconds, against the same N services without checks.

One job, one group: a Python HTTP server task on the group's port and N `service` blocks on
that port (registered with the agent's own service discovery). Run A registers them
without checks, run B with one `http` check each. Each run starts a fresh agent, waits until
every service is registered (and, in B, every check passed once), lets it settle, then
samples the agent's CPU time (utime + stime from /proc/PID/stat) over WINDOWS windows of
WINDOW seconds, and its RSS. Prints per run the median CPU (percent of one core) and RSS,
then B - A.

    python3 tests/stress/checks_cost.py target/release/agent N INTERVAL PORT [WINDOWS WINDOW]

e.g. `python3 tests/stress/checks_cost.py target/release/agent 1000 5 4700`. BENCHMARKS.md
has the figures.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentproc import call as api, cpu_windows, rss_kib, wait_healthy  # noqa: E402

binary, n, interval, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
windows = int(sys.argv[5]) if len(sys.argv) > 5 else 5
window = float(sys.argv[6]) if len(sys.argv) > 6 else 10.0
base = f"http://127.0.0.1:{port}"
second = 1_000_000_000

SERVER = r"""
import http.server, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["NOMAD_PORT_http"])), H).serve_forever()
"""




def job(checks):
    services = []
    for i in range(n):
        s = {"Name": f"svc-{i}", "PortLabel": "http", "Provider": "nomad"}
        if checks:
            s["Checks"] = [{"Name": "http", "Type": "http", "Path": "/health",
                            "Interval": interval * second, "Timeout": 2 * second}]
        services.append(s)
    return {"Job": {"ID": "checks", "Type": "service", "TaskGroups": [{
        "Name": "g", "Networks": [{"DynamicPorts": [{"Label": "http"}]}],
        "Services": services,
        "Tasks": [{"Name": "server", "Driver": "raw_exec",
                   "Config": {"command": "python3", "args": ["-c", SERVER]},
                   "Resources": {"CPU": 100, "MemoryMB": 64}}]}]}}


def run(checks):
    work = tempfile.mkdtemp(prefix="checks-cost-")
    agent = subprocess.Popen(
        # `--dev` for its raw_exec grant; with a data dir of its own, in the temp dir.
        [binary, "run", "--dev", "--data-dir", os.path.join(work, "data"),
         "--bind", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "agent.log"), "w"))
    call = lambda method, path, body=None: api(base, method, path, body)  # noqa: E731
    try:
        wait_healthy(base)
        call("POST", "/v1/jobs", job(checks))
        deadline = time.time() + 300
        while True:
            listed = call("GET", "/v1/services")
            count = sum(len(ns["Services"]) for ns in listed)
            allocs = call("GET", "/v1/job/checks/allocations")
            passed = 0
            if checks and allocs:
                results = call("GET", f"/v1/client/allocation/{allocs[0]['ID']}/checks")
                passed = sum(1 for r in results.values() if r["Status"] == "success")
            if count == n and (not checks or passed == n):
                break
            if time.time() > deadline:
                raise SystemExit(f"only {count} services, {passed} checks passing")
            time.sleep(1)
        time.sleep(interval * 2)
        median, cpu = cpu_windows(agent.pid, windows, window)
        return median, rss_kib(agent.pid) / 1024, cpu
    finally:
        agent.terminate()
        agent.wait(timeout=60)
        # The agent leaves its tasks and executor running, as a client does: end them.
        subprocess.run(["pkill", "-f", "NOMAD_PORT_http"], check=False)
        subprocess.run(["pkill", "-f", work], check=False)
        shutil.rmtree(work, ignore_errors=True)


a = run(False)
print(f"A: {n} services, no checks:        CPU {a[0]:.2f}% of a core (windows {[round(x, 2) for x in a[2]]}), RSS {a[1]:.1f} MiB")
b = run(True)
print(f"B: {n} services, http every {interval} s:  CPU {b[0]:.2f}% of a core (windows {[round(x, 2) for x in b[2]]}), RSS {b[1]:.1f} MiB")
print(f"B - A: CPU {b[0] - a[0]:+.2f} points of a core, RSS {b[1] - a[1]:+.1f} MiB "
      f"({(b[1] - a[1]) * 1024 / n:.1f} KiB per check); {n / interval:.0f} probes per second")
