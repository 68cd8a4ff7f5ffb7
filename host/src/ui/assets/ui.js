// Paddock's UI: the live parts and the buttons. The pages work without this script; it
// follows changes (blocking queries), the task logs (the framed logs endpoint) and sends
// the buttons' requests to the HTTP API with the ACL token kept in sessionStorage.
'use strict';

const TOKEN_KEY = 'paddock.token';
const token = () => sessionStorage.getItem(TOKEN_KEY) || '';

// A request to the agent, with the token when there is one.
async function api(url, opts = {}) {
  const headers = Object.assign({}, opts.headers || {});
  if (token()) headers['X-Nomad-Token'] = token();
  const r = await fetch(url, Object.assign({}, opts, { headers, credentials: 'same-origin' }));
  if (r.status === 403) needToken(await r.text());
  return r;
}

// Say that the token is needed, with a way to give it.
function needToken(why) {
  const n = document.getElementById('notice');
  if (!n || !n.hidden) return;
  n.textContent = (why || 'Permission denied') + '. ';
  const a = document.createElement('a');
  a.href = '/ui/login?next=' + encodeURIComponent(location.pathname + location.search);
  a.textContent = 'Enter the ACL token';
  n.append(a, ' to see live updates and use the buttons.');
  n.hidden = false;
}

function say(text, bad) {
  const out = document.getElementById('action-result');
  if (out) { out.textContent = text; out.classList.toggle('error', !!bad); return; }
  const n = document.getElementById('notice');
  if (n) { n.textContent = text; n.hidden = false; }
}

// Refresh the page's live parts: fetch the page again and swap each [data-live] element
// (or only those `which` selects).
async function refresh(which = '[data-live][id]') {
  const r = await api(location.href, { headers: { Accept: 'text/html' } });
  if (!r.ok) return;
  const doc = new DOMParser().parseFromString(await r.text(), 'text/html');
  for (const el of document.querySelectorAll(which)) {
    const fresh = doc.getElementById(el.id);
    if (fresh && fresh.innerHTML !== el.innerHTML) el.innerHTML = fresh.innerHTML;
  }
  document.dispatchEvent(new Event('paddock:refreshed'));
}

// Follow the page's watch URL with blocking queries; refresh when its index moves.
async function watch(url) {
  let index = 0;
  const sep = url.includes('?') ? '&' : '?';
  for (;;) {
    try {
      const r = await api(url + sep + 'index=' + index + '&wait=30s');
      if (r.status === 403 || r.status === 404) return;
      const next = Number(r.headers.get('X-Nomad-Index') || 0);
      await r.arrayBuffer();
      if (index !== 0 && next !== index) await refresh();
      index = next > 0 ? next : index;
      if (!r.ok) await sleep(2000);
    } catch (e) {
      await sleep(2000);
    }
  }
}

const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

// Buttons that call the API (stop, purge).
document.addEventListener('click', async (ev) => {
  const b = ev.target.closest('button[data-action]');
  if (!b) return;
  if (b.dataset.confirm && !confirm(b.dataset.confirm)) return;
  b.disabled = true;
  try {
    const r = await api(b.dataset.url, { method: b.dataset.action });
    say(r.ok ? (b.textContent + ': done') : (b.textContent + ' failed: ' + await r.text()), !r.ok);
    if (r.ok) await refresh();
  } finally { b.disabled = false; }
});

// Forms that post their fields as JSON to the API (restart, signal, stop).
document.addEventListener('submit', async (ev) => {
  const f = ev.target;
  if (f.matches('form[data-login]')) {
    sessionStorage.setItem(TOKEN_KEY, f.elements.token.value.trim());
    return; // the form goes on to the agent, which sets the pages' cookie
  }
  if (f.matches('form[data-logout]')) { sessionStorage.removeItem(TOKEN_KEY); return; }
  if (!f.matches('form[data-api]')) return;
  ev.preventDefault();
  if (f.dataset.confirm && !confirm(f.dataset.confirm)) return;
  const body = {};
  for (const [k, v] of new FormData(f)) if (v !== '') body[k] = v;
  const what = f.querySelector('button[type=submit]').textContent;
  const r = await api(f.dataset.api, { method: 'POST', body: JSON.stringify(body), headers: { 'Content-Type': 'application/json' } });
  say(r.ok ? what + ': sent' : what + ' failed: ' + await r.text(), !r.ok);
  if (r.ok) await refresh();
});

// `key=value` lines (blank ones skipped) as an object; null, said, when a line has no key.
function keyValues(text) {
  const out = {};
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const i = line.indexOf('=');
    if (i < 1) { say('Each line needs key=value: ' + line, true); return null; }
    out[line.slice(0, i).trim()] = line.slice(i + 1);
  }
  return out;
}

// A variable's editor: `key=value` lines written with a check-and-set on the index the
// page showed, so a change made meanwhile is not overwritten (the API answers 409).
document.addEventListener('submit', async (ev) => {
  const f = ev.target;
  if (!f.matches('form[data-var]')) return;
  ev.preventDefault();
  const items = keyValues(f.elements.items.value);
  if (!items) return;
  const url = f.dataset.var + '&cas=' + f.dataset.cas;
  const r = await api(url, { method: 'PUT', body: JSON.stringify({ Items: items }), headers: { 'Content-Type': 'application/json' } });
  if (r.status === 409) { say('Not saved: the variable changed since this page was shown; reload to see it', true); return; }
  if (!r.ok) { say('Not saved: ' + await r.text(), true); return; }
  const v = await r.json();
  f.dataset.cas = v.ModifyIndex;
  const idx = document.getElementById('var-index');
  if (idx) idx.textContent = v.ModifyIndex;
  say('Saved (index ' + v.ModifyIndex + ')');
});

// A parameterized job's dispatch: meta lines and a payload, sent as Nomad's request.
document.addEventListener('submit', async (ev) => {
  const f = ev.target;
  if (!f.matches('form[data-dispatch]')) return;
  ev.preventDefault();
  const meta = keyValues(f.elements.meta.value);
  if (!meta) return;
  const bytes = new TextEncoder().encode(f.elements.payload.value);
  const payload = btoa(String.fromCharCode(...bytes));
  const r = await api(f.dataset.dispatch, { method: 'POST', body: JSON.stringify({ Meta: meta, Payload: payload }), headers: { 'Content-Type': 'application/json' } });
  if (!r.ok) { say('Dispatch failed: ' + await r.text(), true); return; }
  const d = await r.json();
  await refresh(); // the new child in the list; then the message, which a refresh would clear
  say('Dispatched ' + d.DispatchedJobID);
});

// The job editor: Plan parses the text (HCL through /v1/jobs/parse) and shows the plan's
// diff and placements; Run registers what was planned, with the plan's index as a
// check-and-set, and opens the job's page.
function diffList(d) {
  const ul = document.createElement('ul');
  ul.className = 'diff';
  const mark = { Added: '+', Deleted: '-', Edited: '+/-', None: '' };
  const item = (type, text) => {
    const li = document.createElement('li');
    li.className = (type || 'None').toLowerCase();
    li.textContent = (mark[type] || '') + ' ' + text;
    ul.append(li);
    return li;
  };
  for (const f of d.Fields || []) {
    if (f.Type === 'None') continue;
    const was = f.Type === 'Added' ? '' : JSON.stringify(f.Old) + ' => ';
    item(f.Type, f.Name + ': ' + (f.Type === 'Deleted' ? JSON.stringify(f.Old) : was + JSON.stringify(f.New)));
  }
  for (const o of d.Objects || []) {
    if (o.Type === 'None') continue;
    item(o.Type, o.Name + ' {').append(diffList(o));
  }
  for (const g of d.TaskGroups || []) {
    const u = Object.entries(g.Updates || {}).map(([k, v]) => v + ' ' + k).join(', ');
    const li = item(g.Type, 'Task Group: "' + g.Name + '"' + (u ? ' (' + u + ')' : ''));
    li.dataset.group = g.Name;
    const inner = diffList(g);
    for (const t of g.Tasks || []) {
      if (t.Type === 'None') continue;
      const ti = document.createElement('li');
      ti.className = t.Type.toLowerCase();
      ti.textContent = (mark[t.Type] || '') + ' Task: "' + t.Name + '"' + (t.Annotations ? ' (' + t.Annotations.join(', ') + ')' : '');
      ti.append(diffList(t));
      inner.append(ti);
    }
    li.append(inner);
  }
  return ul;
}

function editor(f) {
  const run = document.getElementById('run-job');
  const out = document.getElementById('plan-result');
  let planned = null;
  const text = () => f.elements.source.value;
  f.elements.source.addEventListener('input', () => { planned = null; run.disabled = true; });
  async function parse() {
    const src = text().trim();
    if (src.startsWith('{')) {
      let v;
      try { v = JSON.parse(src); } catch (e) { say('The JSON does not parse: ' + e.message, true); return null; }
      return { job: v.Job || v, submission: null };
    }
    const variables = f.elements.variables.value;
    const r = await api('/v1/jobs/parse', { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ JobHCL: src, Variables: variables, Canonicalize: true }) });
    if (!r.ok) { say('The job does not parse: ' + await r.text(), true); return null; }
    return { job: await r.json(), submission: { Source: src, Format: 'hcl2', Variables: variables } };
  }
  f.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    run.disabled = true;
    planned = null;
    const p = await parse();
    if (!p) return;
    const ns = p.job.Namespace || f.dataset.namespace || 'default';
    const url = '/v1/job/' + encodeURIComponent(p.job.ID) + '/plan?namespace=' + encodeURIComponent(ns);
    const r = await api(url, { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ Job: p.job, Diff: true }) });
    if (!r.ok) { say('Plan failed: ' + await r.text(), true); return; }
    const plan = await r.json();
    out.replaceChildren();
    const head = document.createElement('p');
    head.className = 'diff-job ' + (plan.Diff.Type || 'None').toLowerCase();
    head.textContent = ({ Added: '+ ', Deleted: '- ', Edited: '+/- ' }[plan.Diff.Type] || '') + 'Job: "' + p.job.ID + '"';
    out.append(head, diffList(plan.Diff));
    const failed = Object.entries(plan.FailedTGAllocs || {});
    const dry = document.createElement('p');
    dry.id = 'plan-placement';
    dry.className = failed.length ? 'error' : '';
    dry.textContent = failed.length
      ? 'Failed to place all allocations: ' + failed.map(([g, m]) => g + ' (' + (m.CoalescedFailures + 1) + ' unplaced'
        + Object.entries(m.DimensionExhausted || {}).map(([k, n]) => '; ' + k + ' exhausted on ' + n + ' node(s)').join('')
        + Object.entries(m.ConstraintFiltered || {}).map(([k, n]) => '; ' + k + ' filtered ' + n + ' node(s)').join('') + ')').join(', ')
      : 'All tasks successfully allocated.';
    out.append(dry);
    if (plan.Warnings) {
      const w = document.createElement('pre');
      w.className = 'warnings';
      w.textContent = 'Job Warnings:\n' + plan.Warnings;
      out.append(w);
    }
    document.getElementById('plan').hidden = false;
    planned = { job: p.job, submission: p.submission, index: plan.JobModifyIndex, ns };
    run.disabled = false;
    say('Planned at job modify index ' + plan.JobModifyIndex + '. Run submits exactly this.');
  });
  run.addEventListener('click', async () => {
    if (!planned) return;
    run.disabled = true;
    const body = { Job: planned.job, EnforceIndex: true, JobModifyIndex: planned.index };
    if (planned.submission) body.Submission = planned.submission;
    const r = await api('/v1/jobs?namespace=' + encodeURIComponent(planned.ns), { method: 'POST',
      headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    if (!r.ok) { say('Run failed: ' + await r.text() + (r.status === 400 ? ' (plan again to see what changed)' : ''), true); return; }
    location.href = '/ui/jobs/' + encodeURIComponent(planned.job.ID) + '?namespace=' + encodeURIComponent(planned.ns);
  });
}

// Task logs: the framed endpoint (JSON objects back to back, Data in base64), followed.
function logs(section) {
  const alloc = section.dataset.logs;
  const pre = document.getElementById('log');
  const task = document.getElementById('log-task');
  const type = document.getElementById('log-type');
  const pause = document.getElementById('log-pause');
  const state = document.getElementById('log-state');
  const MAX = 256 * 1024;
  let ctl = null, pos = 0, held = '', paused = false, gen = 0;

  const show = (text) => {
    if (paused) { held = (held + text).slice(-MAX); return; }
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    let all = pre.textContent + text;
    if (all.length > MAX) all = all.slice(-MAX);
    pre.textContent = all;
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  };

  // Split complete top-level JSON objects off the front of buf.
  const frames = (buf) => {
    const out = []; let depth = 0, inStr = false, esc = false, start = 0;
    for (let i = 0; i < buf.length; i++) {
      const c = buf[i];
      if (inStr) { if (esc) esc = false; else if (c === '\\') esc = true; else if (c === '"') inStr = false; continue; }
      if (c === '"') inStr = true;
      else if (c === '{') { if (depth++ === 0) start = i; }
      else if (c === '}' && --depth === 0) out.push(buf.slice(start, i + 1)), start = i + 1;
    }
    return [out, depth === 0 ? '' : buf.slice(start)];
  };

  async function follow() {
    const mine = ++gen;
    if (ctl) ctl.abort();
    ctl = new AbortController();
    const url = '/v1/client/fs/logs/' + encodeURIComponent(alloc) + '?task=' + encodeURIComponent(task.value) +
      '&type=' + type.value + '&follow=true&origin=start&offset=' + pos;
    state.textContent = 'Following';
    try {
      const r = await api(url, { signal: ctl.signal });
      if (!r.ok) { state.textContent = 'Logs: ' + r.status + ' ' + (await r.text()); return; }
      const reader = r.body.getReader();
      const text = new TextDecoder(), bytes = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += text.decode(value, { stream: true });
        let got; [got, buf] = frames(buf);
        for (const f of got) {
          const fr = JSON.parse(f);
          if (!fr.Data) continue;
          const raw = Uint8Array.from(atob(fr.Data), (ch) => ch.charCodeAt(0));
          pos += raw.length;
          show(bytes.decode(raw, { stream: true }));
        }
      }
      if (mine !== gen) return;
      state.textContent = 'The task is not running; waiting for more output';
    } catch (e) {
      if (mine !== gen || e.name === 'AbortError') return;
      state.textContent = 'Disconnected; retrying';
    }
    await sleep(3000);
    if (mine === gen) follow();
  }

  // Start from the last 64 KiB: the sizes of the task's log files (rotated ones too).
  async function tail() {
    let total = 0;
    try {
      const r = await api('/v1/client/fs/ls/' + encodeURIComponent(alloc) + '?path=alloc/logs');
      if (r.ok) {
        const prefix = task.value + '.' + type.value + '.';
        for (const f of await r.json()) {
          if (f.Name.startsWith(prefix) && /^\d+$/.test(f.Name.slice(prefix.length))) total += f.Size;
        }
      }
    } catch (e) { /* from the start, then */ }
    pos = Math.max(0, total - 64 * 1024);
    follow();
  }

  const restart = () => { held = ''; pre.textContent = ''; tail(); };
  task.addEventListener('change', restart);
  type.addEventListener('change', restart);
  pause.addEventListener('click', () => {
    paused = !paused;
    pause.setAttribute('aria-pressed', String(paused));
    pause.textContent = paused ? 'Resume' : 'Pause';
    state.textContent = paused ? 'Paused' : 'Following';
    if (!paused && held) { const h = held; held = ''; show(h); }
  });
  restart();
}

// The exec terminal: `alloc exec` over the API's websocket with a terminal, in xterm.js.
// A browser cannot set a header on a websocket, so the token is the first message
// (`ws_handshake=true`, as Nomad's UI does).
function execTerminal(form) {
  const box = document.getElementById('exec-terminal');
  let ws = null;
  const utf8 = new TextEncoder();
  const b64 = (text) => {
    let s = '';
    for (const b of utf8.encode(text)) s += String.fromCharCode(b);
    return btoa(s);
  };
  const bytes = (data) => Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    if (ws) ws.close();
    box.replaceChildren();
    delete box.dataset.exit;
    delete box.dataset.closed;
    const term = new Terminal({ fontSize: 13, scrollback: 2000 });
    const fit = new FitAddon.FitAddon();
    term.loadAddon(fit);
    term.open(box);
    fit.fit();
    // In view: xterm.js draws nothing while its element is off screen.
    box.scrollIntoView({ block: 'nearest' });
    const argv = form.elements.command.value.trim().split(/\s+/).filter(Boolean);
    const q = new URLSearchParams({
      task: form.elements.task.value, command: JSON.stringify(argv), tty: 'true', ws_handshake: 'true',
    });
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const socket = new WebSocket(`${proto}//${location.host}/v1/client/allocation/${encodeURIComponent(form.dataset.exec)}/exec?${q}`);
    ws = socket;
    const send = (o) => { if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(o)); };
    const size = () => send({ tty_size: { height: term.rows, width: term.cols } });
    let beat = null;
    socket.onopen = () => {
      send({ version: 1, auth_token: token() });
      size();
      beat = setInterval(() => send({}), 10000);
      term.focus();
      box.dataset.open = 'true';
    };
    socket.onmessage = (m) => {
      const v = JSON.parse(m.data);
      if (v.stdout && v.stdout.data) term.write(bytes(v.stdout.data));
      if (v.stderr && v.stderr.data) term.write(bytes(v.stderr.data));
      if (v.exited) {
        term.write(`\r\n[exited with code ${v.result.exit_code}]\r\n`);
        box.dataset.exit = String(v.result.exit_code);
      }
    };
    socket.onclose = (e) => {
      clearInterval(beat);
      if (e.code !== 1000) term.write(`\r\n[closed: ${e.reason || e.code}]\r\n`);
      box.dataset.closed = String(e.code);
    };
    term.onData((d) => send({ stdin: { data: b64(d) } }));
    term.onResize(size);
    window.addEventListener('resize', () => fit.fit());
  });
}

document.addEventListener('DOMContentLoaded', () => {
  for (const f of document.querySelectorAll('form[data-logout]')) f.hidden = !token();
  const x = document.querySelector('form[data-exec]');
  if (x && window.Terminal) execTerminal(x);
  if (document.body.dataset.watch) watch(document.body.dataset.watch);
  // Charts change with every sample, not with an index: fetched again on a timer, while
  // the tab is shown.
  for (const el of document.querySelectorAll('[data-poll][id]')) {
    setInterval(() => { if (!document.hidden) refresh('#' + el.id); }, Number(el.dataset.poll) || 5000);
  }
  const e = document.querySelector('form[data-editor]');
  if (e) editor(e);
  const l = document.querySelector('section[data-logs]');
  if (l) logs(l);
});
