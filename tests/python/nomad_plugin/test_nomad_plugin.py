"""An independent Python client of paddock-nomad-driver, written from the .proto files
and Nomad's and go-plugin's conventions: it starts the binary as Nomad's client does,
reads go-plugin's handshake line, dials the Unix socket and drives the BasePlugin and
Driver services, with config encoded as Nomad's cty msgpack.

Run by the Rust integration test `nomad_plugin_python::python_client_drives_the_plugin`,
which passes the binary in PADDOCK_NOMAD_DRIVER. Needs the packages in requirements.txt.
"""

import concurrent.futures
import importlib
import importlib.resources
import json
import os
import queue
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid
from pathlib import Path

import grpc
import msgpack
from grpc_health.v1 import health_pb2, health_pb2_grpc
from google.protobuf.duration_pb2 import Duration
from grpc_tools import protoc

BIN = os.environ["PADDOCK_NOMAD_DRIVER"]
PROTO_ROOT = Path(__file__).resolve().parents[3] / "nomad-plugin" / "proto"
COOKIE_KEY = "NOMAD_PLUGIN_MAGIC_COOKIE"
COOKIE = "e4327c2e01eabfd75a8a67adb114fb34a757d57eee7728d857a8cec6e91a7255"
RECOVERABLE_URL = "type.googleapis.com/hashicorp.nomad.plugins.shared.structs.RecoverableError"

# The plugin config's schema as the agent's `plugin "paddock" { config {...} }` block is
# parsed: root attributes, and the attributes of the `grant` and `limits` blocks.
PLUGIN_SCHEMA = {
    "component_config": None,
    "components": None,
    "data_dir": None,
    "driver": None,
    "driver_file": None,
    "driver_sha256": None,
    "grant": {a: None for a in ("chroot_env", "denied_host_gids", "denied_host_uids",
                                "devices", "env", "events", "isolation", "loader_env",
                                "pids_max", "process", "task_dir", "variables")},
    "limits": {a: None for a in ("call_timeout", "instance_reuse", "max_concurrent_calls",
                                 "memory_mb")},
    "task_config_fields": None,
    "verify_key": None,
}


def generate_protos():
    """Compile every .proto under nomad-plugin/proto to Python, and import the modules."""
    out = Path(tempfile.mkdtemp(prefix="paddock-nomad-pb-"))
    well_known = importlib.resources.files("grpc_tools") / "_proto"
    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in PROTO_ROOT.rglob("*.proto"))
    args = ["protoc", f"-I{PROTO_ROOT}", f"-I{well_known}", f"--python_out={out}",
            f"--grpc_python_out={out}", *protos]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {protos}")
    # Regular packages (so no installed package of the same name wins), except the
    # top-level `google`, which stays a namespace shared with protobuf's.
    for d in out.rglob("*"):
        if d.is_dir() and d != out / "google":
            (d / "__init__.py").touch()
    sys.path.insert(0, str(out))
    names = {
        "base": "plugins.base.proto.base_pb2",
        "base_grpc": "plugins.base.proto.base_pb2_grpc",
        "drivers": "plugins.drivers.proto.driver_pb2",
        "drivers_grpc": "plugins.drivers.proto.driver_pb2_grpc",
        "structs": "plugins.shared.structs.proto.recoverable_error_pb2",
        "controller": "internal.plugin.grpc_controller_pb2",
        "controller_grpc": "internal.plugin.grpc_controller_pb2_grpc",
        "rpc_status": "google.rpc.status_pb2",
    }
    return out, {k: importlib.import_module(v) for k, v in names.items()}


GEN_DIR, PB = generate_protos()
base_pb, base_grpc = PB["base"], PB["base_grpc"]
drv_pb, drv_grpc = PB["drivers"], PB["drivers_grpc"]


def tearDownModule():
    shutil.rmtree(GEN_DIR, ignore_errors=True)


# cty msgpack, as Nomad encodes config.

def cty_type(v):
    """A value's cty type, as JSON (how a dynamic value carries its type)."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, dict):
        return ["object", {k: cty_type(x) for k, x in sorted(v.items())}]
    if isinstance(v, list):
        return ["tuple", [cty_type(x) for x in v]]
    raise TypeError(f"no cty type for {v!r}")


def cty_object(values, schema):
    """An object of `schema` (attribute -> None, or a nested block's schema): every
    attribute present, keys sorted, nil when unset."""
    out = {}
    for k in sorted(set(schema) | set(values)):
        v, nested = values.get(k), schema.get(k)
        out[k] = cty_object(v, nested) if nested and v is not None else v
    return out


def plugin_config(**values):
    return msgpack.packb(cty_object(values, PLUGIN_SCHEMA), use_bin_type=True)


def task_config(fields, **values):
    """A job's `config {}` for a schema of `any` attributes: set ones as dynamic values
    ([type JSON as bytes, value]), unset ones nil."""
    wrapped = {k: [json.dumps(cty_type(v), separators=(",", ":")).encode(), v]
               for k, v in values.items()}
    return msgpack.packb(cty_object(wrapped, dict.fromkeys(fields)), use_bin_type=True)


class Plugin:
    """The plugin process as Nomad's client starts it, and a channel to it."""

    def __init__(self):
        env = dict(os.environ, PLUGIN_PROTOCOL_VERSIONS="2", PLUGIN_MIN_PORT="10000",
                   PLUGIN_MAX_PORT="25000", **{COOKIE_KEY: COOKIE})
        self.proc = subprocess.Popen([BIN], env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.stdout, self.stderr = queue.Queue(), []
        self.readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.stdout.put)),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.stderr.append)),
        ]
        for t in self.readers:
            t.start()
        self.channel, self.socket = None, None

    @staticmethod
    def _read(pipe, put):
        for raw in pipe:
            put(raw.decode(errors="replace").rstrip("\n"))
        put(None)

    def handshake(self):
        """Read the handshake line and connect to the address it gives."""
        self.line = self.stdout.get(timeout=60)
        assert self.line, "stdout closed before the handshake line"
        self.socket = self.line.split("|")[3]
        # A plain channel, as a grpcio user writes it: gRPC's C core names the socket's
        # path, percent-encoded, as the `:authority`, which the plugin's relay mends.
        self.channel = grpc.insecure_channel("unix:" + self.socket)
        grpc.channel_ready_future(self.channel).result(timeout=10)
        self.base = base_grpc.BasePluginStub(self.channel)
        self.driver = drv_grpc.DriverStub(self.channel)
        self.controller = PB["controller_grpc"].GRPCControllerStub(self.channel)
        self.health = health_pb2_grpc.HealthStub(self.channel)
        return self

    def set_config(self, msgpack_config):
        nomad = base_pb.NomadConfig(driver=base_pb.NomadDriverConfig(ClientMinPort=10000,
                                                                     ClientMaxPort=25000))
        return self.base.SetConfig(base_pb.SetConfigRequest(
            msgpack_config=msgpack_config, nomad_config=nomad, plugin_api_version="v0.1.0"),
            timeout=60)

    def close(self):
        if self.channel is not None:
            self.channel.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for t in self.readers:
            t.join(timeout=5)
        self.proc.stdout.close()
        self.proc.stderr.close()
        # A plugin killed does not remove its socket's folder.
        if self.socket and Path(self.socket).parent.name.startswith("paddock-plugin"):
            shutil.rmtree(Path(self.socket).parent, ignore_errors=True)


def stream_into(call):
    """Collect a server stream's messages in a queue, None when it ends."""
    q = queue.Queue()

    def pump():
        try:
            for m in call:
                q.put(m)
        except grpc.RpcError:
            pass
        q.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return q


def status_details(err):
    """The google.rpc.Status a failed call carries in its trailing metadata."""
    raw = dict(err.trailing_metadata() or ()).get("grpc-status-details-bin")
    return PB["rpc_status"].Status.FromString(raw) if raw is not None else None


class NomadPluginTest(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="paddock-nomad-py-"))
        self.plugins = []

    def tearDown(self):
        for p in self.plugins:
            p.close()
        # A task executor, if a plugin started one, outlives it; its folder is in our data dir.
        mine = str(self.tmp).encode()
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if mine in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)

    def launch(self):
        p = Plugin()
        self.plugins.append(p)
        return p.handshake()

    def mkdir(self, name):
        d = self.tmp / name
        d.mkdir(parents=True)
        return str(d)

    def configured(self, **grant):
        p = self.launch()
        p.set_config(plugin_config(driver="mock", data_dir=self.mkdir("data"), grant=grant or None))
        return p

    def task(self, fields, name, alloc=None, raw_config=None, **config):
        alloc = alloc or str(uuid.uuid4())
        alloc_dir = self.tmp / "allocs" / alloc
        (alloc_dir / name).mkdir(parents=True)
        return drv_pb.TaskConfig(
            id=f"{alloc}/{name}/{secrets.token_hex(4)}", name=name,
            msgpack_driver_config=raw_config or task_config(fields, **config),
            env={"NOMAD_ALLOC_ID": alloc, "NOMAD_TASK_NAME": name,
                 "NOMAD_ALLOC_DIR": str(alloc_dir / "alloc")},
            alloc_dir=str(alloc_dir), stdout_path="/dev/null", stderr_path="/dev/null",
            task_group_name="g", job_name="j", job_id="j", alloc_id=alloc,
            namespace="default", node_name="n1", node_id=str(uuid.uuid4()))

    def task_fields(self, p):
        spec = p.driver.TaskConfigSchema(drv_pb.TaskConfigSchemaRequest(), timeout=10).spec
        self.assertEqual(spec.WhichOneof("block"), "object", spec)
        return sorted(spec.object.attributes)

    def start(self, p, t):
        return p.driver.StartTask(drv_pb.StartTaskRequest(task=t), timeout=60)

    def start_error(self, p, t):
        with self.assertRaises(grpc.RpcError) as cm:
            self.start(p, t)
        return cm.exception

    def test_run_without_the_cookie_says_what_it_is_and_exits_1(self):
        out = subprocess.run([BIN], env={k: v for k, v in os.environ.items() if k != COOKIE_KEY},
                             capture_output=True, timeout=60)
        self.assertEqual(out.returncode, 1)
        self.assertEqual(out.stdout, b"")
        self.assertIn("plugin for Nomad", out.stderr.decode())
        self.assertFalse(out.stderr.lstrip().startswith(b"{"), "a message for a person, not a log")

    def test_handshake_health_and_hclog_lines(self):
        p = self.launch()
        m = re.fullmatch(r"1\|2\|unix\|(/[^|]+)\|grpc\|", p.line)
        self.assertIsNotNone(m, p.line)
        self.assertTrue(stat.S_ISSOCK(os.stat(m.group(1)).st_mode))
        h = p.health.Check(health_pb2.HealthCheckRequest(service="plugin"), timeout=10)
        self.assertEqual(h.status, health_pb2.HealthCheckResponse.SERVING)
        p.controller.Shutdown(PB["controller"].Empty(), timeout=10)
        p.proc.wait(timeout=5)
        for t in p.readers:
            t.join(timeout=5)
        lines = [line for line in p.stderr if line is not None]
        self.assertTrue(lines, "the plugin logged nothing")
        for line in lines:
            entry = json.loads(line)
            self.assertIsInstance(entry["@message"], str, line)
            self.assertIn(entry["@level"], ("trace", "debug", "info", "warn", "error"), line)
            self.assertRegex(entry["@timestamp"],
                             r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$")

    def test_plugin_info_and_config_schema(self):
        p = self.launch()
        info = p.base.PluginInfo(base_pb.PluginInfoRequest(), timeout=10)
        self.assertEqual(info.type, base_pb.DRIVER)
        self.assertEqual(info.type, 2)
        self.assertEqual(list(info.plugin_api_versions), ["v0.1.0"])
        self.assertRegex(info.plugin_version,
                         r"^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")
        self.assertEqual(info.name, "paddock")
        spec = p.base.ConfigSchema(base_pb.ConfigSchemaRequest(), timeout=10).spec
        self.assertEqual(spec.WhichOneof("block"), "object", spec)
        root = spec.object.attributes
        for key in ("driver", "components", "grant", "limits", "data_dir"):
            self.assertIn(key, root)
        # The schema this client encodes config by is the plugin's.
        self.assertEqual(set(root), set(PLUGIN_SCHEMA))
        for block in ("grant", "limits"):
            self.assertEqual(root[block].WhichOneof("block"), "block_value")
            nested = root[block].block_value.nested
            self.assertEqual(set(nested.object.attributes), set(PLUGIN_SCHEMA[block]), block)

    def test_set_config_accepts_nomads_encoding_and_names_a_bad_driver(self):
        p = self.launch()
        data = self.mkdir("data")
        with self.assertRaises(grpc.RpcError) as cm:
            p.set_config(plugin_config(driver="no_such_driver", data_dir=data))
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("no_such_driver", cm.exception.details())
        p.set_config(plugin_config(driver="mock", data_dir=data, grant={"events": True}))
        # Configured: the driver service answers now.
        caps = p.driver.Capabilities(drv_pb.CapabilitiesRequest(), timeout=10)
        self.assertTrue(caps.HasField("capabilities"))

    def test_a_mock_tasks_life(self):
        p = self.configured(events=True)
        fp_call = p.driver.Fingerprint(drv_pb.FingerprintRequest())
        fps = stream_into(fp_call)
        first = fps.get(timeout=10)
        self.assertIsNotNone(first, "the fingerprint stream ended at once")
        self.assertEqual(first.health, drv_pb.FingerprintResponse.HEALTHY, first)
        attr = first.attributes["driver.paddock"]
        self.assertEqual(attr.WhichOneof("value"), "bool_val")
        self.assertTrue(attr.bool_val)
        time.sleep(0.5)
        self.assertTrue(fps.empty(), "the fingerprint stream ended or sent again at once")
        fp_call.cancel()
        caps = p.driver.Capabilities(drv_pb.CapabilitiesRequest(), timeout=10).capabilities
        self.assertTrue(caps.send_signals)
        self.assertTrue(caps.exec, "the mock answers exec (its echo shell)")
        fields = self.task_fields(p)
        self.assertIn("run_for", fields)

        t = self.task(fields, "web", run_for="30s")
        handle = self.start(p, t).handle
        self.assertEqual(handle.config.id, t.id)
        self.assertEqual(handle.config.name, "web")
        self.assertEqual(handle.config.msgpack_driver_config, t.msgpack_driver_config)
        self.assertGreaterEqual(handle.version, 1)
        self.assertEqual(handle.state, drv_pb.RUNNING)
        self.assertTrue(handle.driver_state)

        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(p.driver.WaitTask, drv_pb.WaitTaskRequest(task_id=t.id),
                                  timeout=30)
            time.sleep(0.5)
            self.assertFalse(waiting.done(), "WaitTask returned while the task ran")
            running = p.driver.InspectTask(drv_pb.InspectTaskRequest(task_id=t.id), timeout=10)
            self.assertEqual(running.task.state, drv_pb.RUNNING)
            # Exec into it, unary and streaming, as Nomad's client calls them.
            execd = p.driver.ExecTask(drv_pb.ExecTaskRequest(
                task_id=t.id, command=["sh", "-c", "echo hi; exit 3"],
                timeout=Duration(seconds=10)), timeout=20)
            self.assertEqual((execd.stdout, execd.result.exit_code), (b"hi\n", 3))
            frames = [
                drv_pb.ExecTaskStreamingRequest(setup=drv_pb.ExecTaskStreamingRequest.Setup(
                    task_id=t.id, command=["sh"], tty=False)),
                drv_pb.ExecTaskStreamingRequest(
                    stdin=drv_pb.ExecTaskStreamingIOOperation(data=b"echo two\n")),
                drv_pb.ExecTaskStreamingRequest(
                    stdin=drv_pb.ExecTaskStreamingIOOperation(close=True)),
            ]
            out, code = b"", None
            for r in p.driver.ExecTaskStreaming(iter(frames), timeout=20):
                out += r.stdout.data
                if r.exited:
                    code = r.result.exit_code
            self.assertEqual((out, code), (b"two\n", 0))
            stop = drv_pb.StopTaskRequest(task_id=t.id, timeout=Duration(seconds=2))
            p.driver.StopTask(stop, timeout=20)
            waited = waiting.result(timeout=15)
        self.assertTrue(waited.HasField("result"), waited)

        status = p.driver.InspectTask(drv_pb.InspectTaskRequest(task_id=t.id), timeout=10).task
        self.assertEqual(status.id, t.id)
        self.assertEqual(status.state, drv_pb.EXITED)
        for field in ("started_at", "completed_at", "result"):
            self.assertTrue(status.HasField(field), field)
        self.assertGreater(status.started_at.seconds, 0)
        self.assertGreaterEqual(status.completed_at.ToNanoseconds(),
                                status.started_at.ToNanoseconds())
        p.driver.DestroyTask(drv_pb.DestroyTaskRequest(task_id=t.id, force=True), timeout=20)
        with self.assertRaises(grpc.RpcError) as cm:
            p.driver.InspectTask(drv_pb.InspectTaskRequest(task_id=t.id), timeout=10)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.NOT_FOUND)

        # A plain msgpack map is read as well; this task exits 3.
        plain = msgpack.packb({"run_for": "100ms", "exit_code": 3})
        t = self.task(fields, "batch", raw_config=plain)
        self.start(p, t)
        waited = p.driver.WaitTask(drv_pb.WaitTaskRequest(task_id=t.id), timeout=20)
        self.assertEqual(waited.result.exit_code, 3, waited)

    def test_start_errors_say_whether_to_retry(self):
        p = self.configured()
        fields = self.task_fields(p)
        for recoverable in (True, False):
            t = self.task(fields, "t", start_error="busy", start_error_recoverable=recoverable)
            err = self.start_error(p, t)
            self.assertEqual(err.code(), grpc.StatusCode.FAILED_PRECONDITION)
            self.assertIn("busy", err.details())
            details = status_details(err)
            self.assertIsNotNone(details, "no grpc-status-details-bin")
            self.assertEqual(details.code, grpc.StatusCode.FAILED_PRECONDITION.value[0])
            self.assertEqual(details.details[0].type_url, RECOVERABLE_URL)
            flag = PB["structs"].RecoverableError.FromString(details.details[0].value)
            self.assertIs(flag.recoverable, recoverable)
        # A field the schema lacks (Nomad's parser would refuse it first) is named.
        t = self.task(fields, "t", colour="red")
        err = self.start_error(p, t)
        self.assertEqual(err.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("colour", err.details())

    def test_task_events_reach_nomad(self):
        p = self.configured(events=True)
        fields = self.task_fields(p)
        call = p.driver.TaskEvents(drv_pb.TaskEventsRequest())
        call.initial_metadata()  # the plugin has taken the subscription
        events = stream_into(call)
        t = self.task(fields, "web", run_for="5s", driver_event="hello")
        self.start(p, t)
        deadline = time.monotonic() + 10
        while True:
            try:
                ev = events.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                self.fail("no event \"hello\" within 10 s")
            self.assertIsNotNone(ev, "the event stream ended")
            if ev.message == "hello":
                break
        self.assertEqual((ev.alloc_id, ev.task_name), (t.alloc_id, "web"))
        self.assertEqual(ev.task_id, t.id)
        self.assertTrue(ev.HasField("timestamp"))
        call.cancel()

    def test_shutdown_exits_0_within_2_seconds(self):
        p = self.configured()
        p.controller.Shutdown(PB["controller"].Empty(), timeout=10)
        try:
            self.assertEqual(p.proc.wait(timeout=2), 0)
        except subprocess.TimeoutExpired:
            self.fail("the plugin did not exit within 2 s of Shutdown")
        self.assertFalse(os.path.exists(p.socket), "the socket outlived the plugin")


if __name__ == "__main__":
    unittest.main(verbosity=2)
