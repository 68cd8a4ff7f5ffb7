// The `countdown` task driver, in JavaScript: a task that runs for `seconds` on the host's
// clock and then exits with `exit_code`. It starts no process: the host's timer is its only
// resource, and `wait` hands the remaining time back to the host as `after-ns`.
//
// Stateless, as the contract asks: everything about a task lives in its handle's
// `driver-state` (JSON, format HANDLE_FORMAT), so any instance can serve any call.

import { now } from "paddock:plugin/timer@0.1.1";
import { write } from "paddock:plugin/log@0.1.1";
import { append } from "paddock:plugin/task-logs@0.1.1";

const NAME = "countdown";
const VERSION = "0.1.0";
// Format of the handle's driver-state. Change it whenever the layout changes: a version of
// this driver that cannot read a handle refuses it with not-supported.
const HANDLE_FORMAT = 1;
const MAX_SECONDS = 86400;

// Signals this driver understands, by name, with their Linux numbers.
const SIGNALS = {
  SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGUSR1: 10, SIGUSR2: 12, SIGTERM: 15,
};
// Signals that end a countdown, as their default action would end a process.
const ENDING = new Set(["SIGINT", "SIGQUIT", "SIGKILL", "SIGTERM"]);

const encoder = new TextEncoder();
const decoder = new TextDecoder();

// A driver-error variant; componentize-js turns a thrown value into the result's err.
function driverError(tag, val) {
  return { tag, val };
}
const failed = (message, recoverable = false) => driverError("failed", { message, recoverable });

// The task config's problems, one field-error each; empty when it is valid.
function configErrors(json) {
  let config;
  try {
    config = JSON.parse(json === "" ? "{}" : json);
  } catch (e) {
    return [{ field: "", message: `not JSON: ${e.message}` }];
  }
  if (config === null || typeof config !== "object" || Array.isArray(config)) {
    return [{ field: "", message: "the config must be an object" }];
  }
  const errors = [];
  for (const key of Object.keys(config)) {
    if (key !== "seconds" && key !== "exit_code") {
      errors.push({ field: key, message: "unknown field (known: seconds, exit_code)" });
    }
  }
  const { seconds, exit_code: exitCode } = config;
  if (seconds === undefined) {
    errors.push({ field: "seconds", message: "required" });
  } else if (typeof seconds !== "number" || !(seconds >= 0) || seconds > MAX_SECONDS) {
    errors.push({ field: "seconds", message: `must be a number from 0 to ${MAX_SECONDS}` });
  }
  if (exitCode !== undefined && !(Number.isInteger(exitCode) && exitCode >= 0 && exitCode <= 255)) {
    errors.push({ field: "exit_code", message: "must be an integer from 0 to 255" });
  }
  return errors;
}

function parseConfig(json) {
  const errors = configErrors(json);
  if (errors.length > 0) throw driverError("invalid-config", errors);
  const config = JSON.parse(json === "" ? "{}" : json);
  return { seconds: config.seconds, exitCode: config.exit_code ?? 0 };
}

// Handle state. Times are ns since the Unix epoch, kept as decimal strings (JSON has no u64).
function readHandle(handle) {
  if (handle.version !== HANDLE_FORMAT) {
    throw driverError(
      "not-supported",
      `handle format ${handle.version}: this ${NAME} ${VERSION} reads format ${HANDLE_FORMAT} only`,
    );
  }
  let s;
  try {
    s = JSON.parse(decoder.decode(handle.driverState));
  } catch {
    s = null;
  }
  if (s === null || typeof s !== "object" || typeof s.end !== "string" || typeof s.started !== "string") {
    throw driverError("task-not-found", `${handle.taskId}: the handle's state is not one ${NAME} wrote`);
  }
  return {
    started: BigInt(s.started),
    end: BigInt(s.end),
    exitCode: s.exit_code,
    signal: s.signal ?? null,
    endedAt: s.ended_at ? BigInt(s.ended_at) : null,
    received: s.received ?? [],
  };
}

function writeHandle(taskId, s) {
  const state = {
    started: s.started.toString(),
    end: s.end.toString(),
    exit_code: s.exitCode,
    signal: s.signal,
    ended_at: s.endedAt === null ? null : s.endedAt.toString(),
    received: s.received,
  };
  return { version: HANDLE_FORMAT, taskId, driverState: encoder.encode(JSON.stringify(state)) };
}

// How the task ended, or null while it counts down.
function exitOf(s, at) {
  if (s.signal !== null) {
    return { exitCode: 0, signal: SIGNALS[s.signal], oomKilled: false, err: undefined };
  }
  if (at >= s.end) {
    return { exitCode: s.exitCode, signal: 0, oomKilled: false, err: undefined };
  }
  return null;
}

// A line in the task's stdout log; a log that cannot be written is not worth failing over.
function say(taskId, line) {
  try {
    append(taskId, "stdout", encoder.encode(`${line}\n`));
  } catch (e) {
    write("debug", `${taskId}: task log not written: ${JSON.stringify(e.payload ?? e)}`);
  }
}

export const taskDriver = {
  info() {
    return { name: NAME, version: VERSION };
  },

  capabilities() {
    return { sendSignals: true, exec: false, fsIsolation: "none" };
  },

  validateConfig(config) {
    const errors = configErrors(config);
    if (errors.length > 0) throw driverError("invalid-config", errors);
  },

  fingerprint() {
    const t = now();
    const ok = t > 0n;
    return {
      health: ok ? "healthy" : "unhealthy",
      healthDescription: ok ? "the host clock runs" : "the host clock reads 0",
      attributes: [
        ["version", { tag: "str", val: VERSION }],
        ["max_seconds", { tag: "int", val: BigInt(MAX_SECONDS) }],
      ],
    };
  },

  start(task) {
    const { seconds, exitCode } = parseConfig(task.driverConfig);
    const started = now();
    const end = started + BigInt(Math.round(seconds * 1e9));
    write("info", `${task.id}: counting down ${seconds}s, then exit code ${exitCode}`);
    say(task.id, `countdown: ${seconds}s, then exit ${exitCode}`);
    return writeHandle(task.id, {
      started, end, exitCode, signal: null, endedAt: null, received: [],
    });
  },

  recover(handle) {
    readHandle(handle);
    return handle;
  },

  wait(handle) {
    const s = readHandle(handle);
    const t = now();
    const exit = exitOf(s, t);
    if (exit !== null) return { tag: "exited", val: exit };
    return { tag: "pending", val: { processes: [], afterNs: s.end - t, handle: undefined } };
  },

  stop(handle, _timeoutNs, signal) {
    const s = readHandle(handle);
    if (!(signal in SIGNALS)) throw failed(`stop: unknown signal ${JSON.stringify(signal)}`);
    const t = now();
    if (exitOf(s, t) === null) {
      // The countdown ends at once on its kill signal, whatever it is.
      s.signal = signal;
      s.endedAt = t;
      say(handle.taskId, `countdown: stopped with ${signal}`);
    }
    return writeHandle(handle.taskId, s);
  },

  destroy(handle, force) {
    const s = readHandle(handle);
    if (!force && exitOf(s, now()) === null) {
      throw failed(`${handle.taskId} is still counting down: stop it first, or destroy with force`);
    }
  },

  inspect(handle) {
    const s = readHandle(handle);
    const t = now();
    const exit = exitOf(s, t);
    const completedAt = exit === null ? 0n : (s.endedAt ?? s.end);
    const left = exit === null ? s.end - t : 0n;
    return {
      id: handle.taskId,
      state: exit === null ? "running" : "exited",
      startedAt: s.started,
      completedAt,
      exitResult: exit ?? undefined,
      attributes: [
        ["remaining_ms", (left / 1000000n).toString()],
        ["signals_received", s.received.join(",")],
      ],
    };
  },

  signal(handle, signal) {
    const s = readHandle(handle);
    if (!(signal in SIGNALS)) throw failed(`unknown signal ${JSON.stringify(signal)}`);
    const t = now();
    if (exitOf(s, t) !== null) throw failed(`${handle.taskId} has already exited`);
    s.received.push(signal);
    if (ENDING.has(signal)) {
      s.signal = signal;
      s.endedAt = t;
    }
    say(handle.taskId, `countdown: got ${signal}`);
    return writeHandle(handle.taskId, s);
  },

  stats(handle) {
    const s = readHandle(handle);
    // No process of its own: the handle's few bytes are all the task holds.
    return {
      rssBytes: BigInt(handle.driverState.length),
      cpuUserNs: 0n,
      cpuSystemNs: 0n,
      cpuPercent: 0,
      timestamp: now() > s.started ? now() : s.started,
    };
  },
};
