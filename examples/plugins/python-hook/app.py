"""The `py-guard` hook, in Python: a resource policy and environment for Paddock tasks.

Before every start it checks the task against the policy in its plugin config and refuses a
task outside it (`refused`, which fails the task with a Setup Failure naming this hook).
A task inside it gets `PADDOCK_PY_*` variables derived from its resources and meta, so a
program can size itself without parsing Nomad's variables:

    PADDOCK_PY_TASK       <job>/<group>/<task>
    PADDOCK_PY_CPU_MHZ    the task's cpu
    PADDOCK_PY_MEMORY_MB  the task's memory (its memory_max when that is larger)
    PADDOCK_PY_HEAP_MB    heap_percent of that memory, for runtimes that take a heap size
    PADDOCK_PY_META_<KEY> each meta key (upper-cased, other characters as `_`)
    PADDOCK_PY_START      how many times prestart ran for this task (1 on the first start)

Plugin config (JSON from the agent's `plugin "py-guard" { config { ... } }`), all optional:

    max_memory_mb  refuse tasks asking for more memory (MiB)
    max_cpu_mhz    refuse tasks asking for more cpu (MHz)
    required_meta  meta keys every task must carry (job, group or task meta)
    heap_percent   share of memory in PADDOCK_PY_HEAP_MB, 1 to 100 (default 75)
    delay_ms       pause in prestart, on the host's timer (a slow policy lookup)
"""

import json
import re

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.task_hook import (
    HookError_Failed,
    HookError_InvalidConfig,
    HookError_Refused,
    PrestartRequest,
    PrestartResponse,
    TaskInfo,
)
from wit_world.imports import config, log, timer
from wit_world.imports.info import PluginInfo
from wit_world.imports.types import ExitResult, FieldError, LogLevel

NAME = "py-guard"
VERSION = "0.1.0"
PREFIX = "PADDOCK_PY_"
KNOWN = ("max_memory_mb", "max_cpu_mhz", "required_meta", "heap_percent", "delay_ms")


def policy() -> dict:
    """The plugin config, checked; `invalid-config` names every bad field."""
    raw = config.get().strip() or "{}"
    try:
        cfg = json.loads(raw)
    except ValueError as e:
        raise Err(HookError_InvalidConfig([FieldError("", f"not JSON: {e}")]))
    if not isinstance(cfg, dict):
        raise Err(HookError_InvalidConfig([FieldError("", "the config must be an object")]))
    errors = [FieldError(k, f"unknown field (known: {', '.join(KNOWN)})") for k in cfg if k not in KNOWN]

    def number(key, low, high):
        v = cfg.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high):
            errors.append(FieldError(key, f"must be an integer from {low} to {high}"))

    number("max_memory_mb", 1, 1 << 30)
    number("max_cpu_mhz", 1, 1 << 30)
    number("heap_percent", 1, 100)
    number("delay_ms", 0, 60_000)
    required = cfg.get("required_meta", [])
    if not isinstance(required, list):
        errors.append(FieldError("required_meta", "must be a list of meta keys"))
    else:
        for i, key in enumerate(required):
            if not isinstance(key, str) or not key:
                errors.append(FieldError(f"required_meta[{i}]", "must be a non-empty string"))
    if errors:
        raise Err(HookError_InvalidConfig(errors))
    return cfg


def memory_of(task: TaskInfo) -> int:
    r = task.resources
    return max(r.memory_mb, r.memory_max_mb)


def violations(task: TaskInfo, cfg: dict) -> list:
    """What about the task breaks the policy, worded for the task's events."""
    found = []
    memory = memory_of(task)
    limit = cfg.get("max_memory_mb")
    if limit is not None and memory > limit:
        found.append(f"memory {memory} MB is over the node's limit of {limit} MB")
    cpu = task.resources.cpu_mhz
    limit = cfg.get("max_cpu_mhz")
    if limit is not None and cpu > limit:
        found.append(f"cpu {cpu} MHz is over the node's limit of {limit} MHz")
    meta = dict(task.meta)
    missing = [k for k in cfg.get("required_meta", []) if not meta.get(k)]
    if missing:
        found.append(f"meta {', '.join(missing)} is required")
    return found


def env_key(key: str) -> str:
    return PREFIX + "META_" + re.sub(r"[^A-Z0-9]", "_", key.upper())


def task_env(task: TaskInfo, cfg: dict, starts: int) -> list:
    memory = memory_of(task)
    env = {
        PREFIX + "TASK": f"{task.job_id}/{task.group_name}/{task.task_name}",
        PREFIX + "CPU_MHZ": str(task.resources.cpu_mhz),
        PREFIX + "MEMORY_MB": str(memory),
        PREFIX + "HEAP_MB": str(memory * cfg.get("heap_percent", 75) // 100),
        PREFIX + "START": str(starts),
    }
    for key, value in task.meta:
        # The agent's own meta (which hooks to run, and so on) is not the program's business.
        if not key.startswith("paddock."):
            env[env_key(key)] = value
    return sorted(env.items())


def who(task: TaskInfo) -> str:
    return f"{task.alloc_id[:8]}/{task.task_name}"


class TaskHook(exports.TaskHook):
    def info(self) -> PluginInfo:
        return PluginInfo(NAME, VERSION)

    def prestart(self, req: PrestartRequest) -> PrestartResponse:
        task = req.task
        cfg = policy()
        delay = cfg.get("delay_ms", 0)
        if delay:
            timer.sleep(delay * 1_000_000)
        broken = violations(task, cfg)
        if broken:
            reason = "; ".join(broken)
            log.write(LogLevel.WARN, f"{who(task)}: refused: {reason}")
            raise Err(HookError_Refused(reason))
        previous = dict(req.previous_state)
        try:
            starts = int(previous.get("starts", "0")) + 1
        except ValueError:
            raise Err(HookError_Failed(f"state `starts` is not a number: {previous['starts']!r}"))
        first = previous.get("first_start_ns") or str(timer.now())
        env = task_env(task, cfg, starts)
        log.write(LogLevel.INFO, f"{who(task)}: start {starts}, {len(env)} variables")
        state = [("starts", str(starts)), ("first_start_ns", first)]
        return PrestartResponse(env, state, False, [], [])

    def poststart(self, task: TaskInfo) -> None:
        log.write(LogLevel.DEBUG, f"{who(task)}: running")

    def exited(self, task: TaskInfo, outcome: ExitResult) -> None:
        if outcome.exit_code == 0 and outcome.signal == 0 and not outcome.oom_killed:
            log.write(LogLevel.INFO, f"{who(task)}: exited cleanly")
            return
        how = f"exit code {outcome.exit_code}, signal {outcome.signal}"
        if outcome.oom_killed:
            how += f", killed for memory (it asked for {memory_of(task)} MB)"
        if outcome.err:
            how += f", {outcome.err}"
        log.write(LogLevel.WARN, f"{who(task)}: exited: {how}")

    def stop(self, task: TaskInfo, state: list) -> None:
        # Nothing held outside the state map, so a second stop is as harmless as the first.
        starts = dict(state).get("starts", "0")
        log.write(LogLevel.DEBUG, f"{who(task)}: done after {starts} start(s)")

    def update(self, task: TaskInfo) -> None:
        # A running task is not refused on an update (it would not stop it); the operator
        # hears that its next start will be.
        broken = violations(task, policy())
        if broken:
            log.write(LogLevel.WARN, f"{who(task)}: its next start will be refused: {'; '.join(broken)}")
