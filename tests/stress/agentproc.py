"""What the stress scripts share: the agent's HTTP API, its CPU time and RSS from /proc, and
CPU sampled over windows."""
import json
import os
import statistics
import time
import urllib.request


def call(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read() or b"null")


def wait_healthy(base, seconds=120):
    deadline = time.time() + seconds
    while True:
        try:
            call(base, "GET", "/v1/agent/health")
            return
        except Exception:
            if time.time() > deadline:
                raise SystemExit("the agent did not start")
            time.sleep(0.2)


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_windows(pid, windows, window):
    """The process's CPU over `windows` windows of `window` seconds, percent of one core:
    (median, each)."""
    tick = os.sysconf("SC_CLK_TCK")
    cpu = []
    for _ in range(windows):
        t0, c0 = time.time(), cpu_ticks(pid)
        time.sleep(window)
        t1, c1 = time.time(), cpu_ticks(pid)
        cpu.append((c1 - c0) / tick / (t1 - t0) * 100)
    return statistics.median(cpu), cpu
