"""Drive a running Paddock agent with python-nomad, as a user's script would.

Run by the Rust integration test `python::python_nomad_suite`, which starts the agent
and passes its address in PADDOCK_ADDR (and, for the token case, PADDOCK_TOKEN).
Needs the packages in requirements.txt.
"""

import base64
import json
import os
import queue
import time
import unittest
import urllib.parse

import nomad
import nomad.api.exceptions as nx
import requests
from prometheus_client.parser import text_string_to_metric_families

ADDR = os.environ["PADDOCK_ADDR"]
TOKEN = os.environ.get("PADDOCK_TOKEN")
URL = urllib.parse.urlparse(ADDR)


def client(token=TOKEN):
    return nomad.Nomad(host=URL.hostname, port=URL.port, token=token, timeout=30)


def wait(what, fn, timeout=30.0):
    deadline = time.time() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


SCRIPT = (
    "trap 'echo got-hup' HUP; echo hello-from-python; echo oops >&2; "
    "while true; do sleep 0.2; done"
)


def web_job(job_id):
    return {
        "Job": {
            "ID": job_id,
            "Name": job_id,
            "Type": "service",
            "Datacenters": ["dc1"],
            "TaskGroups": [
                {
                    "Name": "g",
                    "Count": 1,
                    "Tasks": [
                        {
                            "Name": "t",
                            "Driver": "raw_exec",
                            "Config": {"command": "/bin/sh", "args": ["-c", SCRIPT]},
                        }
                    ],
                }
            ],
        }
    }


def event_types(alloc, task="t"):
    return [e["Type"] for e in alloc["TaskStates"][task]["Events"]]


def frames(text):
    """Concatenated JSON frames of a framed (non-plain) log stream, decoded."""
    out, dec, i = b"", json.JSONDecoder(), 0
    text = text.strip()
    while i < len(text):
        frame, end = dec.raw_decode(text, i)
        if frame.get("Data"):
            out += base64.b64decode(frame["Data"])
        i = end
        while i < len(text) and text[i].isspace():
            i += 1
    return out.decode()


class UserScript(unittest.TestCase):
    """One job's whole life through python-nomad, step by step."""

    def test_job_lifecycle(self):
        n = client()
        reg = n.job.register_job("py-web", web_job("py-web"))
        self.assertIn("EvalID", reg)
        # Registration answers before it places, as Nomad's does: the evaluation is
        # followed from pending to complete.
        ev = wait(
            "the evaluation to complete",
            lambda: (lambda e: e if e["Status"] != "pending" else None)(
                n.evaluation.get_evaluation(reg["EvalID"])
            ),
        )
        self.assertEqual(ev["Status"], "complete")
        self.assertEqual(ev["JobID"], "py-web")

        # List and read the job.
        self.assertIn("py-web", [j["ID"] for j in n.jobs.get_jobs()])
        self.assertIn("py-web", n.jobs)
        self.assertEqual(n.job.get_job("py-web")["TaskGroups"][0]["Name"], "g")
        self.assertEqual(n.job.get_summary("py-web")["JobID"], "py-web")
        self.assertTrue(n.job.get_evaluations("py-web"))

        # Its allocation runs; its events say how it got there.
        allocs = wait(
            "a running allocation",
            lambda: [a for a in n.job.get_allocations("py-web") if a["ClientStatus"] == "running"],
        )
        alloc_id = allocs[0]["ID"]
        alloc = n.allocation.get_allocation(alloc_id)
        for t in ("Received", "Task Setup", "Started"):
            self.assertIn(t, event_types(alloc))
        self.assertIn(alloc_id, [a["ID"] for a in n.allocations.get_allocations()])
        self.assertIn(alloc_id, [a["ID"] for a in n.evaluation.get_allocations(reg["EvalID"])])
        found = n.search.search(alloc_id[:6], "allocs")
        self.assertEqual(found["Matches"]["allocs"], [alloc_id])
        self.assertIn("py-web", n.search.search("py-", "all")["Matches"]["jobs"])

        # Logs, plain and framed, stdout and stderr.
        logs = n.client.stream_logs
        wait(
            "the task's first line",
            lambda: "hello-from-python" in logs.stream(alloc_id, "t", "stdout", plain=True),
        )
        # The executor pumps stdout and stderr apart: the stderr line may land a moment later.
        wait(
            "the task's stderr line",
            lambda: logs.stream(alloc_id, "t", "stderr", plain=True) != "",
        )
        self.assertEqual(logs.stream(alloc_id, "t", "stderr", plain=True), "oops\n")
        framed = logs.stream(alloc_id, "t", "stdout", plain=False)
        self.assertIn("hello-from-python", frames(framed))
        tail = logs.stream(alloc_id, "t", "stdout", origin="end", offset=5, plain=True)
        self.assertEqual(tail, "thon\n")

        # Files of the allocation.
        names = [f["Name"] for f in n.client.ls.list_files(alloc_id, "/")]
        self.assertIn("alloc", names)
        self.assertIn("t", names)
        self.assertIn("hello-from-python", n.client.cat.read_file(alloc_id, "alloc/logs/t.stdout.0"))
        self.assertTrue(n.client.stat.stat_file(alloc_id, "alloc/logs")["IsDir"])
        with self.assertRaises(nx.BadRequestNomadException):
            n.client.cat.read_file(alloc_id, "../../../../etc/passwd")

        # Stats of the allocation and of the node.
        stats = n.client.allocation.read_allocation_stats(alloc_id)
        self.assertGreater(stats["ResourceUsage"]["MemoryStats"]["RSS"], 0)
        self.assertIn("t", stats["Tasks"])
        host = n.client.stats.read_stats()
        self.assertGreater(host["Memory"]["Total"], 0)

        # Signal: the task's trap answers.
        n.client.allocation.signal_allocation(alloc_id, "SIGHUP", task="t")
        wait("the trap's line", lambda: "got-hup" in logs.stream(alloc_id, "t", "stdout", plain=True))

        # Restart: a Restart Signaled event, and the task runs again.
        n.client.allocation.restart_allocation(alloc_id)
        wait(
            "the restart",
            lambda: "Restart Signaled" in event_types(n.allocation.get_allocation(alloc_id))
            and n.allocation.get_allocation(alloc_id)["TaskStates"]["t"]["State"] == "running",
        )

        # Stop the allocation, then deregister and purge the job.
        stop = n.allocation.stop_allocation(alloc_id)
        self.assertEqual(n.evaluation.get_evaluation(stop["EvalID"])["TriggeredBy"], "alloc-stop")
        wait(
            "the allocation to stop",
            lambda: n.allocation.get_allocation(alloc_id)["TaskStates"]["t"]["State"] == "dead",
        )
        # The client's collection keeps the record, as Nomad's server keeps it.
        n.client.gc_all_allocations.garbage_collect()
        self.assertEqual(n.allocation.get_allocation(alloc_id)["ClientStatus"], "complete")
        dereg = n.job.deregister_job("py-web", purge=True)
        self.assertIn("EvalID", dereg)
        self.assertNotIn("py-web", n.jobs)
        with self.assertRaises(nx.URLNotFoundNomadException):
            n.job.get_job("py-web")


class Cluster(unittest.TestCase):
    def test_node_agent_status_regions(self):
        n = client()
        nodes = n.nodes.get_nodes()
        self.assertEqual(len(nodes), 1)
        node = n.node.get_node(nodes[0]["ID"])
        self.assertTrue(node["Drivers"]["raw_exec"]["Healthy"])
        self.assertIn("kernel.name", node["Attributes"])
        self.assertEqual(n.agent.get_agent()["stats"]["client"]["node_id"], nodes[0]["ID"])
        self.assertTrue(n.status.leader.get_leader())
        self.assertEqual(n.regions.get_regions(), ["global"])

    def test_parse_and_validate(self):
        n = client()
        hcl = 'job "parsed" {\n  group "g" {\n    task "t" {\n      driver = "mock"\n      config {\n        run_for = "1s"\n      }\n    }\n  }\n}\n'
        job = n.jobs.parse(hcl)
        self.assertEqual(job["ID"], "parsed")
        self.assertEqual(job["TaskGroups"][0]["Tasks"][0]["Driver"], "mock")
        ok = n.validate.validate_job({"Job": job}).json()
        self.assertEqual(ok["ValidationErrors"], [])
        job["TaskGroups"][0]["Tasks"][0]["Config"]["run_for"] = "whenever"
        bad = n.validate.validate_job({"Job": job}).json()
        self.assertTrue(any("Config.run_for" in e for e in bad["ValidationErrors"]), bad)

    def test_a_job_registered_with_its_hcl_source_keeps_it(self):
        # As `nomad job run` does: the HCL parsed by the agent, then registered with the
        # source beside it (Nomad's Submission), then read back by version.
        n = client()
        hcl = 'job "py-src" {\n  type = "batch"\n  group "g" {\n    task "t" {\n      driver = "mock"\n      config {\n        run_for = "10ms"\n      }\n    }\n  }\n}\n'
        job = n.jobs.parse(hcl)
        submission = {"Source": hcl, "Format": "hcl2", "VariableFlags": {"x": "1"}, "Variables": ""}
        reg = n.job.register_job("py-src", {"Job": job, "Submission": submission})
        self.assertEqual(reg["Warnings"], "")
        got = n.job.request("py-src", "submission", params={"version": 0}, method="get").json()
        self.assertEqual(got["Source"], hcl)
        self.assertEqual(got["Format"], "hcl2")
        self.assertEqual(got["VariableFlags"], {"x": "1"})
        self.assertEqual((got["JobID"], got["Namespace"], got["Version"]), ("py-src", "default", 0))
        with self.assertRaises(nx.URLNotFoundNomadException):
            n.job.request("py-src", "submission", params={"version": 1}, method="get")
        n.job.deregister_job("py-src", purge=True)
        with self.assertRaises(nx.URLNotFoundNomadException):
            n.job.request("py-src", "submission", params={"version": 0}, method="get")

    def test_bad_requests_raise_the_matching_exceptions(self):
        n = client()
        with self.assertRaises(nx.URLNotFoundNomadException):
            n.job.get_job("no-such-job")
        with self.assertRaises(nx.URLNotFoundNomadException):
            n.allocation.get_allocation("no-such-alloc")
        with self.assertRaises(nx.BadRequestNomadException) as caught:
            n.job.register_job("bad", {"Job": {"ID": "bad", "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t"}]}]}})
        self.assertIn("Job.TaskGroups[0].Tasks[0].Driver", caught.exception.nomad_resp.text)
        with self.assertRaises(nx.BaseNomadException) as caught:
            n.job.register_job("big", {"Job": {"ID": "big", "Meta": {"pad": "x" * (5 << 20)}}})
        self.assertEqual(caught.exception.nomad_resp.status_code, 413)
        self.assertNotIn("bad", n.jobs)


class Metrics(unittest.TestCase):
    def test_json_and_prometheus(self):
        n = client()
        n.job.register_job("py-metrics", web_job("py-metrics"))
        alloc_id = wait(
            "a running allocation",
            lambda: [a["ID"] for a in n.job.get_allocations("py-metrics") if a["ClientStatus"] == "running"],
        )[0]
        try:
            m = n.metrics.get_metrics()
            running = [g for g in m["Gauges"] if g["Name"] == "nomad.client.allocations.running"]
            self.assertGreaterEqual(running[0]["Value"], 1)

            headers = {"X-Nomad-Token": TOKEN} if TOKEN else {}
            # The stats of a task that just started may take a scrape or two to show.
            def scrape():
                text = requests.get(f"{ADDR}/v1/metrics?format=prometheus", headers=headers, timeout=30).text
                fams = {f.name: f for f in text_string_to_metric_families(text)}
                return fams if "nomad_client_allocs_memory_rss" in fams else None

            fams = wait("per-task metrics", scrape)
            self.assertEqual(fams["nomad_client_allocations_running"].type, "gauge")
            self.assertGreaterEqual(fams["nomad_client_allocations_running"].samples[0].value, 1)

            rss = [s for s in fams["nomad_client_allocs_memory_rss"].samples if s.labels["alloc_id"] == alloc_id]
            self.assertEqual(len(rss), 1)
            self.assertGreater(rss[0].value, 0)
            self.assertEqual(rss[0].labels["job"], "py-metrics")
            self.assertEqual(rss[0].labels["task_group"], "g")
            self.assertEqual(rss[0].labels["task"], "t")

            calls = fams["paddock_component_calls"]
            self.assertEqual(calls.type, "counter")
            starts = [s for s in calls.samples if s.labels.get("component") == "raw_exec" and s.labels.get("op") == "start"]
            self.assertGreaterEqual(starts[0].value, 1)

            hist = fams["paddock_component_call_seconds"]
            self.assertEqual(hist.type, "histogram")
            series = [s for s in hist.samples if s.labels.get("component") == "raw_exec" and s.labels.get("op") == "start"]
            buckets = [s for s in series if s.name.endswith("_bucket")]
            counts = [s.value for s in buckets]
            self.assertEqual(counts, sorted(counts), "buckets are cumulative")
            inf = [s.value for s in buckets if s.labels["le"] == "+Inf"][0]
            count = [s.value for s in series if s.name.endswith("_count")][0]
            self.assertEqual(inf, count)

            for name in ("paddock_component_traps", "paddock_component_deadline_hits", "paddock_compile_cache_hits", "nomad_client_allocs_restart"):
                self.assertIn(name, fams)
        finally:
            n.job.deregister_job("py-metrics", purge=True)


class Events(unittest.TestCase):
    def test_event_stream_through_python_nomad(self):
        n = client()
        stream, stop, events = n.event.stream.get_stream(topic=["Job:py-events", "Allocation:py-events"], timeout=30)
        stream.daemon = True
        stream.start()
        job = web_job("py-events")

        # The stream connects in its own thread: register until a JobRegistered shows, so
        # none is missed for want of a subscriber. (Once connected, the stream may first
        # carry allocation events of an earlier registration.)
        def registered():
            n.job.register_job("py-events", job)
            deadline = time.time() + 0.5
            while time.time() < deadline:
                try:
                    m = events.get(timeout=0.1)
                except queue.Empty:
                    continue
                if m["Events"][0]["Topic"] == "Job":
                    return m
            return None

        try:
            msg = wait("a JobRegistered event", registered)
            ev = msg["Events"][0]
            self.assertEqual((ev["Topic"], ev["Type"], ev["Key"]), ("Job", "JobRegistered", "py-events"))
            self.assertEqual(ev["Payload"]["Job"]["ID"], "py-events")
            self.assertGreater(msg["Index"], 0)

            # Now surely subscribed: stopping the allocation is told as it happens.
            alloc_id = wait(
                "a running allocation",
                lambda: [a["ID"] for a in n.job.get_allocations("py-events") if a["ClientStatus"] == "running"],
            )[0]
            n.allocation.stop_allocation(alloc_id)

            def stop_event():
                try:
                    m = events.get(timeout=1)
                except queue.Empty:
                    return None
                e = m["Events"][0]
                if e["Topic"] == "Allocation" and e["Type"] == "AllocationUpdateDesiredStatus":
                    return e
                return None

            stop_ev = wait("the allocation's stop event", stop_event)
            self.assertEqual(stop_ev["Key"], alloc_id)
            self.assertEqual(stop_ev["Payload"]["Allocation"]["DesiredStatus"], "stop")
            self.assertEqual(stop_ev["Payload"]["Allocation"]["JobID"], "py-events")
        finally:
            stop.set()
            n.job.deregister_job("py-events", purge=True)


class Lists(unittest.TestCase):
    """Namespaces, and the list query python-nomad passes through (filter, paging)."""

    def test_namespaces_and_filtered_lists(self):
        n = client()
        n.namespace.create_namespace({"Name": "py-team", "Description": "from python-nomad"})
        self.assertEqual(n.namespace.get_namespace("py-team")["Description"], "from python-nomad")
        self.assertIn("py-team", [ns["Name"] for ns in n.namespaces.get_namespaces()])
        job = web_job("py-listed")
        job["Job"]["Namespace"] = "py-team"
        n.job.register_job("py-listed", job)
        try:
            listed = n.jobs.get_jobs(namespace="py-team", filter_='ID == "py-listed"')
            self.assertEqual([j["ID"] for j in listed], ["py-listed"])
            self.assertEqual(n.jobs.get_jobs(namespace="py-team", filter_='ID == "zz"'), [])
            allocs = wait(
                "the job's allocation",
                lambda: n.allocations.get_allocations(namespace="py-team", filter_='JobID == "py-listed"'),
            )
            self.assertEqual({a["JobID"] for a in allocs}, {"py-listed"})
            self.assertEqual(len(n.allocations.get_allocations(namespace="*", per_page=1)), 1)
            with self.assertRaises(nx.BadRequestNomadException):
                n.jobs.get_jobs(filter_="ID ==")
            # A namespace with a live job is not deleted.
            with self.assertRaises(nx.BaseNomadException):
                n.namespace.delete_namespace("py-team")
        finally:
            n.job.deregister_job("py-listed", namespace="py-team", purge=True)
        wait(
            "the namespace to be deleted once its job is gone",
            lambda: _deleted(n, "py-team"),
        )


def _deleted(n, name):
    try:
        n.namespace.delete_namespace(name)
        return True
    except nx.BaseNomadException:
        return None


class Token(unittest.TestCase):
    def test_without_the_token_every_call_is_refused(self):
        self.assertTrue(TOKEN, "the suite runs against an agent with an ACL token")
        anon = client(token=None)
        with self.assertRaises(nx.URLNotAuthorizedNomadException):
            anon.jobs.get_jobs()
        with self.assertRaises(nx.URLNotAuthorizedNomadException):
            anon.metrics.get_metrics()
        with self.assertRaises(nx.URLNotAuthorizedNomadException):
            client(token="wrong").nodes.get_nodes()


if __name__ == "__main__":
    unittest.main(verbosity=2)
