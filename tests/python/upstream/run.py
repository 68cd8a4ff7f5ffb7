#!/usr/bin/env python3
"""Run python-nomad's own upstream test suite against a Paddock agent.

    python3 tests/python/upstream/run.py [--update-expected] [-- PYTEST_ARGS...]

What it does, in order:

1. takes the python-nomad version pinned in tests/python/requirements.txt and downloads
   that version's source distribution from PyPI (its `tests/` are not in the wheel) into
   target/python-upstream/sdist/, once;
2. unpacks the sdist's `tests/` into a fresh target/python-upstream/work/ and adds the
   pieces upstream's CI makes with the `nomad` binary, kept in ci/ next to this script:
   `tests/common.py`, `tests/conftest.py`, `example.json`, `example.nomad` and
   `example_batch_parameterized.json`, all with raw_exec tasks;
3. installs requirements.txt (next to this script) into target/python-upstream/deps when
   the interpreter running this script cannot import them already;
4. starts `$PADDOCK_AGENT run --dev` (default target/debug/agent) on a free loopback port
   with a temporary data dir, node name `pynomad1` and an ACL token (upstream's CI runs
   `nomad agent -dev -node pynomad1 --acl-enabled`), and waits for its raw_exec driver to
   be healthy;
5. runs `python -m pytest --runxfail tests/` in the work dir (upstream CI's command) with
   NOMAD_IP, NOMAD_PORT, NOMAD_TOKEN and NOMAD_VERSION pointing at the agent, writing a
   JUnit report;
6. stops the agent and compares the outcome with expected_failures.txt.

It exits 0 only when the tests that failed are exactly the ones expected_failures.txt
lists: a failure not on the list fails the run, and so does a listed test that now
passes (take it off the list); a listed test whose reason starts with `flaky` may do
either. `--update-expected` rewrites the list from this run,
keeping the reasons of tests still failing. Arguments after `--` go to pytest (for
example `-- -k test_job`); with a subset, listed tests that did not run are ignored.

Environment: PADDOCK_AGENT (agent binary), NOMAD_VERSION (what the suite's version gates
compare with; default 1.6.0, newer than every gate), PYTHON_UPSTREAM_TIMEOUT (seconds
for the whole pytest run, default 1800), PYTHON_UPSTREAM_DIR (cache and work dir,
default target/python-upstream).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.request
import uuid
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
CI_FILES = HERE / "ci"
EXPECTED = HERE / "expected_failures.txt"
REQUIREMENTS = HERE / "requirements.txt"
PINNED_IN = HERE.parent / "requirements.txt"
MODULES = ("nomad", "pytest", "flaky", "responses", "mock")
DEFAULT_NOMAD_VERSION = "1.6.0"
NODE_NAME = "pynomad1"


def log(msg: str) -> None:
    print(f"[python-upstream] {msg}", flush=True)


def pinned_version() -> str:
    for line in PINNED_IN.read_text().splitlines():
        m = re.fullmatch(r"\s*python-nomad\s*==\s*([^\s#]+)\s*(#.*)?", line)
        if m:
            return m.group(1)
    sys.exit(f"no `python-nomad==X` pin in {PINNED_IN}")


def fetch_sdist(version: str, cache: Path) -> Path:
    sdist_dir = cache / "sdist"
    found = sorted(sdist_dir.glob(f"python[-_]nomad-{version}.tar.gz"))
    if found:
        return found[0]
    sdist_dir.mkdir(parents=True, exist_ok=True)
    log(f"downloading the python-nomad {version} sdist from PyPI")
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
         "--no-binary", ":all:", "--no-deps", f"python-nomad=={version}", "-d", str(sdist_dir)],
        check=True,
    )
    found = sorted(sdist_dir.glob(f"python[-_]nomad-{version}.tar.gz"))
    if not found:
        sys.exit(f"pip download left no python-nomad {version} sdist in {sdist_dir}")
    return found[0]


def prepare_work_dir(sdist: Path, work: Path) -> None:
    if work.exists():
        shutil.rmtree(work)
    tests = work / "tests"
    tests.mkdir(parents=True)
    with tarfile.open(sdist) as tar:
        members = []
        for m in tar.getmembers():
            parts = Path(m.name).parts
            # <name>-<version>/tests/... only: the sdist's own `nomad/` must not shadow the
            # installed package.
            if len(parts) >= 3 and parts[1] == "tests" and (m.isfile() or m.isdir()):
                m.name = str(Path(*parts[2:]))
                members.append(m)
        kwargs = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(tests, members=members, **kwargs)
    if not list(tests.glob("test_*.py")):
        sys.exit(f"{sdist} has no tests/test_*.py")
    for name in ("common.py", "conftest.py"):
        shutil.copy(CI_FILES / name, tests / name)
    for name in ("example.json", "example.nomad", "example_batch_parameterized.json"):
        shutil.copy(CI_FILES / name, work / name)


def ensure_deps(cache: Path) -> dict[str, str]:
    """Environment additions that make the requirements importable."""
    check = [sys.executable, "-c", "import " + ", ".join(MODULES)]
    if subprocess.run(check, capture_output=True).returncode == 0:
        return {}
    deps = cache / "deps"
    env = {"PYTHONPATH": str(deps)}
    if subprocess.run(check, capture_output=True, env={**os.environ, **env}).returncode != 0:
        log(f"installing {REQUIREMENTS.relative_to(ROOT)} into {deps}")
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "--upgrade", "--target", str(deps), "-r", str(REQUIREMENTS)],
            check=True,
        )
        if subprocess.run(check, capture_output=True, env={**os.environ, **env}).returncode != 0:
            sys.exit(f"the packages in {REQUIREMENTS} are still not importable from {deps}")
    return env


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str, token: str):
    req = urllib.request.Request(url, headers={"X-Nomad-Token": token})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.load(r)


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class Agent:
    def __init__(self, binary: Path, cache: Path):
        self.binary = binary
        self.data_dir = Path(tempfile.mkdtemp(prefix="paddock-pyup-"))
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.token = str(uuid.uuid4())
        self.log_path = cache / "agent.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 120.0) -> None:
        config = self.data_dir / "agent.hcl"
        # Upstream's CI runs `nomad agent -dev -node pynomad1 --acl-enabled`, and its tests
        # use a management token from then on (test_acl.py bootstraps one into
        # tests.common.NOMAD_TOKEN). The agent runs with the ACL system on and a configured
        # management token (`acl { token }`), handed to the suite as NOMAD_TOKEN, so that a
        # subset run without test_acl.py has a token too: with none, python-nomad 2.1.0's
        # user_agent option fails in the client (`headers["User-Agent"] = ...` with
        # headers None).
        # The node offers the data dir's free space as disk, 300 MB per group by default:
        # a set size keeps the suite independent of how full the machine's disk is.
        config.write_text(f'name = "{NODE_NAME}"\n\nacl {{\n  enabled = true\n  token = "{self.token}"\n}}\n'
                          'client {\n  disk_total_mb = 1000000\n}\n')
        cmd = [str(self.binary), "run", "--dev", "--bind", f"127.0.0.1:{self.port}",
               "--data-dir", str(self.data_dir / "data"), "--config", str(config)]
        # The compile cache the Rust tests' agents share, so the built-ins are not compiled
        # again for this agent.
        if os.environ.get("PADDOCK_CACHE_DIR"):
            cmd += ["--cache-dir", os.environ["PADDOCK_CACHE_DIR"]]
        log("starting " + " ".join(cmd))
        self.log_file = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.log_file, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.fail(f"the agent exited with status {self.proc.returncode}")
            try:
                nodes = get_json(self.base + "/v1/nodes", self.token)
                node = next((n for n in nodes if n.get("Name") == NODE_NAME), None)
                raw = ((node or {}).get("Drivers") or {}).get("raw_exec") or {}
                if node and raw.get("Healthy"):
                    log(f"agent up on {self.base} (node {node.get('ID')}, raw_exec healthy)")
                    return
                last = f"nodes: {json.dumps(nodes)[:300]}"
            except (OSError, ValueError) as e:
                last = str(e)
            time.sleep(0.25)
        self.fail(f"the agent was not ready in {timeout:.0f}s ({last})")

    def fail(self, msg: str) -> None:
        self.stop()
        tail = self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""
        sys.exit(f"{msg}\n--- {self.log_path} (tail) ---\n{tail}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                log("the agent did not stop in 20s after SIGTERM; killing it")
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.log_file.close()
            self.proc = None
            self.reap()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def reap(self) -> None:
        """Stop what the agent left running: its task executor and the tasks under it.

        Paddock's `run --dev` leaves them when it stops (Nomad's dev mode destroys its
        allocations on shutdown). They are found as the processes whose command line names
        this run's data dir, and their descendants.
        """
        if not Path("/proc").is_dir():
            return
        marker, parents, roots = str(self.data_dir), {}, set()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
            if marker in cmdline.decode(errors="replace"):
                roots.add(int(entry))
        found, grew = set(roots), bool(roots)
        while grew:
            more = {pid for pid, ppid in parents.items() if ppid in found} - found
            found |= more
            grew = bool(more)
        if not found:
            return
        log(f"the agent left {len(found)} processes running (task executor and tasks); "
            "stopping them")
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in found:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                found = {pid for pid in found if alive(pid)}
                if not found:
                    return
                time.sleep(0.1)


class Watch:
    """While pytest runs: how fast the agent answers, and whether it had the CPU meanwhile.

    A test that times out (python-nomad's client waits 5 s for an answer) says only that an
    answer was late. Every half second this asks the agent for /v1/status/leader (through
    the ACL gate, like every test's request) and reads from /proc the CPU time the agent's
    threads got, the time they spent runnable but waiting for a CPU (schedstat's run delay),
    what the threads were doing while an answer was late (state and wchan), and the
    machine's load average. A late answer while the agent's threads waited for a CPU is the
    machine starving it; one while its threads slept or were blocked is the agent's own.
    """

    INTERVAL = 0.5
    SLOW = 1.0

    def __init__(self, agent: Agent):
        self.agent = agent
        self.pid = agent.proc.pid
        self.stop_event = threading.Event()
        self.answers: list[float] = []
        self.slow: list[str] = []
        self.cpu = self.wait = 0.0
        self.load: list[float] = []
        self.t0 = time.monotonic()
        self.last = self.threads()
        self.thread = threading.Thread(target=self.run, name="watch", daemon=True)

    def threads(self) -> dict[int, tuple[int, int, str, str]]:
        """tid -> (ns on a CPU, ns waiting for one, state, wchan)."""
        out = {}
        try:
            tids = os.listdir(f"/proc/{self.pid}/task")
        except OSError:
            return out
        for tid in tids:
            d = f"/proc/{self.pid}/task/{tid}"
            try:
                cpu, wait, _ = Path(d, "schedstat").read_text().split()
                state = Path(d, "stat").read_text().rsplit(")", 1)[1].split()[0]
                wchan = Path(d, "wchan").read_text().strip() or "-"
                out[int(tid)] = (int(cpu), int(wait), state, wchan)
            except (OSError, ValueError):
                continue
        return out

    def account(self) -> tuple[float, float]:
        """CPU and run-queue seconds of the agent's threads since the last call (threads
        that ended in between lose their last stretch)."""
        now = self.threads()
        cpu = sum(c - self.last.get(t, (0, 0))[0] for t, (c, _, _, _) in now.items())
        wait = sum(w - self.last.get(t, (0, 0))[1] for t, (_, w, _, _) in now.items())
        self.last = now
        self.cpu += cpu / 1e9
        self.wait += wait / 1e9
        return cpu / 1e9, wait / 1e9

    def ping(self, result: dict, done: threading.Event) -> None:
        try:
            get_json(self.agent.base + "/v1/status/leader", self.agent.token)
        except (OSError, ValueError) as e:
            result["error"] = str(e)
        finally:
            done.set()

    def run(self) -> None:
        while not self.stop_event.wait(self.INTERVAL):
            self.account()
            start = time.monotonic()
            result: dict = {}
            done = threading.Event()
            threading.Thread(target=self.ping, args=(result, done), daemon=True).start()
            states: Counter = Counter()
            load = []
            while not done.wait(0.25):
                states.update(f"{st}:{wchan}" for _, _, st, wchan in self.threads().values())
                load.append(os.getloadavg()[0])
            took = time.monotonic() - start
            cpu, wait = self.account()
            load.append(os.getloadavg()[0])
            self.load += load
            self.answers.append(took)
            if took >= self.SLOW or "error" in result:
                seen = ", ".join(f"{k} x{n}" for k, n in states.most_common(6))
                self.slow.append(
                    f"at +{start - self.t0:.1f}s: {took:.2f}s{' (' + result['error'] + ')' if 'error' in result else ''};"
                    f" the agent's threads ran {cpu:.2f}s and waited {wait:.2f}s for a CPU;"
                    f" load average {max(load):.1f}; thread states (state:wchan x samples): {seen}")

    def __enter__(self) -> "Watch":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_event.set()
        self.thread.join(timeout=40)

    def report(self) -> None:
        if not self.answers:
            return
        a = sorted(self.answers)
        log(f"the agent while pytest ran: {len(a)} answers to /v1/status/leader, median "
            f"{a[len(a) // 2] * 1000:.0f} ms, slowest {a[-1] * 1000:.0f} ms; its threads ran "
            f"{self.cpu:.1f}s on a CPU and waited {self.wait:.1f}s for one; load average "
            f"{min(self.load):.1f} to {max(self.load):.1f} ({os.cpu_count()} CPUs)")
        for line in self.slow:
            log("late answer " + line)


def run_pytest(work: Path, agent: Agent, env_extra: dict[str, str], extra: list[str],
               junit: Path, timeout: float) -> int:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NOMAD_", "VAULT_", "PYTEST_"))}
    env.update(env_extra)
    env.update({
        "NOMAD_IP": "127.0.0.1",
        "NOMAD_PORT": str(agent.port),
        "NOMAD_TOKEN": agent.token,
        "NOMAD_VERSION": os.environ.get("NOMAD_VERSION", DEFAULT_NOMAD_VERSION),
        "PYTHONDONTWRITEBYTECODE": "1",
    })
    cmd = [sys.executable, "-m", "pytest", "--runxfail", "-p", "no:cacheprovider",
           "-o", "junit_family=xunit1", f"--junitxml={junit}", "-rfE", "--tb=short",
           *extra, "tests/"]
    log(f"NOMAD_IP=127.0.0.1 NOMAD_PORT={agent.port} NOMAD_VERSION={env['NOMAD_VERSION']} "
        + " ".join(cmd[1:]) + f"  (in {work})")
    try:
        return subprocess.run(cmd, cwd=work, env=env, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        log(f"pytest did not finish in {timeout:.0f}s")
        return -1


def test_id(case: ET.Element) -> str:
    classname = case.get("classname", "")
    file = case.get("file")
    if file:
        path = file
        cls = classname.split(".")[len(Path(file).with_suffix("").parts):]
    else:
        parts = classname.split(".")
        # tests.test_job or tests.test_x.TestClass
        idx = next((i for i, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
        path = "/".join(parts[: idx + 1]) + ".py"
        cls = parts[idx + 1:]
    return "::".join([path, *cls, case.get("name", "")])


RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}


def read_junit(junit: Path) -> dict[str, tuple[str, str]]:
    """test id -> (outcome, message)."""
    results: dict[str, tuple[str, str]] = {}
    if not junit.exists():
        return results
    for case in ET.parse(junit).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for tag in ("error", "failure", "skipped"):
            el = case.find(tag)
            if el is not None:
                outcome = {"error": "error", "failure": "failed", "skipped": "skipped"}[tag]
                text_lines = (el.text or "").strip().splitlines()
                message = (el.get("message") or "").strip() or (text_lines[-1] if text_lines else "")
                break
        tid = test_id(case)
        prev = results.get(tid)
        if prev is None or RANK[outcome] > RANK[prev[0]]:
            results[tid] = (outcome, message)
    return results


def read_durations(junit: Path) -> dict[str, float]:
    """test id -> seconds (the longest, for a test that ran more than once)."""
    out: dict[str, float] = {}
    if junit.exists():
        for case in ET.parse(junit).getroot().iter("testcase"):
            tid = test_id(case)
            out[tid] = max(out.get(tid, 0.0), float(case.get("time") or 0))
    return out


def read_expected() -> dict[str, str]:
    expected: dict[str, str] = {}
    for n, line in enumerate(EXPECTED.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        tid, _, reason = line.partition(" ")
        if tid in expected:
            sys.exit(f"{EXPECTED}:{n}: {tid} is listed twice")
        expected[tid] = reason.strip()
    return expected


CATEGORY_ORDER = ("not-yet-implemented", "mismatch", "flaky", "upstream-bug")


def write_expected(reasons: dict[str, str]) -> None:
    """Write test id -> reason, grouped by category, keeping the file's header comments."""
    header = []
    if EXPECTED.exists():
        for line in EXPECTED.read_text().splitlines():
            if not line.startswith("#"):
                break
            header.append(line)

    def key(tid: str):
        category = reasons[tid].split(":", 1)[0]
        rank = CATEGORY_ORDER.index(category) if category in CATEGORY_ORDER else len(CATEGORY_ORDER)
        return (rank, category, reasons[tid], tid)

    width = max((len(t) for t in reasons), default=0) + 2
    lines, previous = list(header), None
    for tid in sorted(reasons, key=key):
        category = reasons[tid].split(":", 1)[0]
        if category != previous:
            lines.append("")
            previous = category
        lines.append(f"{tid:<{width}}{reasons[tid]}")
    EXPECTED.write_text("\n".join(lines) + "\n")


def short(message: str, limit: int = 160) -> str:
    message = " ".join(message.split())
    return message if len(message) <= limit else message[: limit - 3] + "..."


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update-expected", action="store_true",
                        help="rewrite expected_failures.txt from this run")
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to pytest")
    args = parser.parse_args()

    cache = Path(os.environ.get("PYTHON_UPSTREAM_DIR", ROOT / "target" / "python-upstream"))
    cache.mkdir(parents=True, exist_ok=True)
    binary = Path(os.environ.get("PADDOCK_AGENT", ROOT / "target" / "debug" / "agent"))
    if not binary.is_file():
        sys.exit(f"no agent binary at {binary}: build it (`cargo build -p paddock --bin agent`) "
                 "or set PADDOCK_AGENT")

    version = pinned_version()
    sdist = fetch_sdist(version, cache)
    work = cache / "work"
    prepare_work_dir(sdist, work)
    log(f"python-nomad {version} upstream tests from {sdist.name} in {work}")
    env_extra = ensure_deps(cache)

    # Stopped from outside, still stop the agent and what it started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    junit = cache / "junit.xml"
    junit.unlink(missing_ok=True)
    agent = Agent(binary, cache)
    try:
        agent.start()
        timeout = float(os.environ.get("PYTHON_UPSTREAM_TIMEOUT", "1800"))
        with Watch(agent) as watch:
            rc = run_pytest(work, agent, env_extra, args.pytest_args, junit, timeout)
        watch.report()
    finally:
        agent.stop()

    results = read_junit(junit)
    if not results:
        log(f"no test results (pytest exit status {rc}); see the output above")
        return 1
    (cache / "results.json").write_text(json.dumps(
        {t: {"outcome": o, "message": m} for t, (o, m) in sorted(results.items())}, indent=1))

    counts = {k: 0 for k in RANK}
    for outcome, _ in results.values():
        counts[outcome] += 1
    failing = {t: m for t, (o, m) in results.items() if o in ("failed", "error")}
    expected = read_expected() if EXPECTED.exists() else {}

    if args.update_expected:
        reasons = {t: expected.get(t) or "unclassified: " + short(m, 100)
                   for t, m in failing.items()}
        # A flaky test stays listed whatever this run did.
        reasons.update({t: r for t, r in expected.items() if r.startswith("flaky")})
        write_expected(reasons)
        log(f"wrote {len(failing)} tests to {EXPECTED}")
        expected = read_expected()

    # A listed test whose reason starts with "flaky" may pass or fail.
    flaky = {t for t, reason in expected.items() if reason.startswith("flaky")}
    unexpected = sorted(t for t in failing if t not in expected)
    now_passing = sorted(t for t in expected
                         if t not in flaky and results.get(t, ("",))[0] == "passed")
    not_run = sorted(t for t in expected if t not in results)
    skipped_listed = sorted(t for t in expected if results.get(t, ("",))[0] == "skipped")

    print()
    log(f"{len(results)} tests: {counts['passed']} passed, {counts['failed']} failed, "
        f"{counts['error']} errors, {counts['skipped']} skipped; "
        f"{len(failing)} failing, {len(failing) - len(unexpected)} of them listed "
        f"({len(expected)} listed in {EXPECTED.name})")
    durations = sorted(((d, t) for t, d in read_durations(junit).items()), reverse=True)[:3]
    if durations:
        log("slowest tests: " + ", ".join(f"{t} {d:.2f}s" for d, t in durations))
    for t in sorted(flaky & results.keys()):
        log(f"flaky, {results[t][0]}: {t}")
    if skipped_listed:
        log(f"listed but skipped ({len(skipped_listed)}): " + ", ".join(skipped_listed))
    if not_run and not args.pytest_args:
        log(f"listed but not run ({len(not_run)}); upstream renamed or dropped them?")
        for t in not_run:
            print(f"    {t}")
    if unexpected:
        log(f"UNEXPECTED FAILURES ({len(unexpected)}): fix them, or list them with a reason")
        for t in unexpected:
            print(f"    {t}\n        {results[t][0]}: {short(results[t][1])}")
    if now_passing:
        log(f"NOW PASSING ({len(now_passing)}): take them off {EXPECTED.name}")
        for t in now_passing:
            print(f"    {t}    ({expected[t]})")
    bad = bool(unexpected or now_passing or (not_run and not args.pytest_args))
    if not bad:
        log("OK: the failures are exactly the expected ones")
    # The closing line, in the plain `N passed, N failed` form: "failed" counts what breaks
    # the check (unexpected failures, listed tests now passing), not the listed failures.
    print(f"python-upstream: {counts['passed']} passed, {len(unexpected) + len(now_passing)} "
          f"failed, {counts['skipped']} skipped")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
