// End-to-end tests of the agent's web UI in headless Chromium, driven by playwright-core.
// The integration test `ui::browser_end_to_end` starts the agents and runs this script:
//   UI_BASE        an agent without a token
//   UI_TOKEN_BASE  an agent whose API needs UI_TOKEN
//   UI_SHOTS       where the screenshots go
//   CHROMIUM       the browser (default /usr/bin/chromium)
// Each check prints `ok - ...`; the first that fails prints why and exits 1.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';

const BASE = process.env.UI_BASE;
const TBASE = process.env.UI_TOKEN_BASE;
const TOKEN = process.env.UI_TOKEN;
const SHOTS = process.env.UI_SHOTS || 'target/ui-screenshots';
mkdirSync(SHOTS, { recursive: true });

let passed = 0;
async function check(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok - ${name}`);
  } catch (e) {
    console.log(`not ok - ${name}\n${e.stack || e}`);
    throw e;
  }
}
function assert(cond, msg) { if (!cond) throw new Error(msg); }

// A raw_exec service job that prints a numbered line every second.
function tickerJob(id) {
  return { Job: { ID: id, Type: 'service', TaskGroups: [{ Name: 'g', Count: 1,
    Networks: [{ DynamicPorts: [{ Label: 'http' }] }],
    Services: [{ Name: id, PortLabel: 'http', Provider: 'nomad', Tags: ['e2e'] }], Tasks: [{
    Name: 't', Driver: 'raw_exec',
    Config: { command: '/bin/sh', args: ['-c', 'i=0; while true; do i=$((i+1)); echo "tick $i"; sleep 1; done'] },
    Resources: { CPU: 50, MemoryMB: 32 } }] }] } };
}

async function submit(base, job, token) {
  const headers = { 'Content-Type': 'application/json' };
  if (token) headers['X-Nomad-Token'] = token;
  const r = await fetch(base + '/v1/jobs', { method: 'POST', headers, body: JSON.stringify(job) });
  assert(r.ok, `registering ${job.Job.ID}: ${r.status} ${await r.text()}`);
}

const shot = (page, name) => page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: true });
const lastTick = (text) => Math.max(0, ...[...text.matchAll(/tick (\d+)/g)].map((m) => Number(m[1])));

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-dev-shm-usage'],
});
try {
  const ctx = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const page = await ctx.newPage();
  page.on('dialog', (d) => d.accept());

  await check('/ui redirects to the jobs page', async () => {
    const r = await page.goto(BASE + '/ui');
    assert(r.ok(), `status ${r.status()}`);
    assert(new URL(page.url()).pathname === '/ui/jobs', `landed on ${page.url()}`);
    await page.getByRole('heading', { name: 'Jobs', level: 1 }).waitFor();
  });

  await check('a job submitted over the API appears without a reload', async () => {
    await page.evaluate(() => { window.__sameDocument = true; });
    await submit(BASE, tickerJob('ticker'));
    await page.locator('tr[data-job="ticker"]').waitFor({ timeout: 20000 });
    await page.locator('tr[data-job="ticker"] .status', { hasText: 'running' }).waitFor({ timeout: 20000 });
    assert(await page.evaluate(() => window.__sameDocument === true), 'the page was reloaded');
    await shot(page, 'jobs');
  });

  await check('the job page shows its groups, allocations, evaluations and definition', async () => {
    await page.getByRole('link', { name: 'ticker', exact: true }).click();
    await page.getByRole('heading', { name: 'Job ticker' }).waitFor();
    for (const h of ['Task groups', 'Allocations', 'Evaluations', 'Definition']) {
      await page.getByRole('heading', { name: h }).waitFor();
    }
    await page.locator('table.allocs a').first().waitFor();
    await shot(page, 'job');
  });

  await check('the allocation page follows the task\'s output as it is written', async () => {
    await page.locator('table.allocs a').first().click();
    await page.getByRole('heading', { name: /^Allocation/ }).waitFor();
    const port = await page.locator('dd.addresses [data-port="http"]').textContent();
    assert(/http 127\.0\.0\.1:\d+/.test(port), `the allocation's port: ${port}`);
    // Its service, registered at that address.
    const svc = await page.locator('#services tr[data-service="ticker"]').textContent();
    assert(svc.includes(port.match(/127\.0\.0\.1:\d+/)[0]) && svc.includes('e2e'), `the service row: ${svc}`);
    const log = page.locator('#log');
    await log.filter({ hasText: 'tick' }).waitFor({ timeout: 20000 });
    const first = lastTick(await log.textContent());
    await page.waitForFunction((n) => {
      const m = [...document.getElementById('log').textContent.matchAll(/tick (\d+)/g)];
      return m.length && Number(m[m.length - 1][1]) >= n + 2;
    }, first, { timeout: 15000 });
  });

  await check('pause holds the output and resume shows what came meanwhile', async () => {
    const log = page.locator('#log');
    await page.getByRole('button', { name: 'Pause' }).click();
    const held = await log.textContent();
    await page.waitForTimeout(2500);
    assert((await log.textContent()) === held, 'the log changed while paused');
    await page.getByRole('button', { name: 'Resume' }).click();
    assert(lastTick(await log.textContent()) >= lastTick(held) + 2, 'resume did not show the lines held');
  });

  await check('restart shows the Restart Signaled event without a reload', async () => {
    await page.evaluate(() => { window.__sameDocument = true; });
    await page.locator('#restart-task').selectOption('t');
    await page.getByRole('button', { name: 'Restart', exact: true }).click();
    await page.locator('#tasks li[data-event="Restart Signaled"]').waitFor({ timeout: 20000 });
    await page.locator('#action-result', { hasText: 'Restart: sent' }).waitFor();
    assert(await page.evaluate(() => window.__sameDocument === true), 'the page was reloaded');
    await page.locator('#tasks li[data-event="Started"]').nth(1).waitFor({ timeout: 20000 });
    await page.waitForTimeout(1500);
    await page.setViewportSize({ width: 1000, height: 900 });
    await page.screenshot({ path: `${SHOTS}/allocation.png` });
    await shot(page, 'allocation-full');
  });

  await check('the allocation page charts its CPU and memory with data points', async () => {
    // Samples come every second (the test agent's telemetry interval); the chart refreshes.
    await page.waitForFunction(() => {
      const c = document.querySelector('figure.chart[data-chart="memory"]');
      return c && Number(c.dataset.points) >= 2 && c.querySelectorAll('circle').length >= 2;
    }, null, { timeout: 20000 });
    const mem = await page.locator('figure.chart[data-chart="memory"] circle').last().getAttribute('data-value');
    assert(Number(mem) > 0, `the task's memory: ${mem}`);
    const caption = await page.locator('figure.chart[data-chart="cpu"] figcaption').textContent();
    assert(/MHz of 50 MHz reserved/.test(caption), `the CPU chart says: ${caption}`);
  });

  await check('the exec terminal runs a command in the task and shows its exit code', async () => {
    await page.locator('#exec-command').fill('/bin/sh');
    await page.getByRole('button', { name: 'Open terminal' }).click();
    await page.locator('#exec-terminal[data-open="true"]').waitFor({ timeout: 20000 });
    // The shell's prompt (`#` for root).
    await page.waitForFunction(() => /[#$]/.test(document.querySelector('#exec-terminal .xterm-rows')?.textContent || ''),
      null, { timeout: 20000 }).catch(async (e) => {
      const seen = await page.evaluate(() => ({
        rows: document.querySelector('#exec-terminal .xterm-rows')?.textContent,
        data: { ...document.getElementById('exec-terminal').dataset },
      }));
      throw new Error(`no prompt in the terminal: ${JSON.stringify(seen)}: ${e}`);
    });
    await page.keyboard.type('echo from-the-$((6*7))-ui; exit 3');
    await page.keyboard.press('Enter');
    await page.locator('#exec-terminal[data-exit="3"]').waitFor({ timeout: 20000 });
    const text = await page.locator('#exec-terminal .xterm-rows').textContent();
    assert(text.includes('from-the-42-ui'), `the terminal shows: ${text}`);
    await shot(page, 'exec');
  });

  await check('the file browser lists the allocation\'s files and shows a log', async () => {
    await page.getByRole('link', { name: 'Browse' }).click();
    await page.locator('tr[data-file="alloc"] a').click();
    await page.locator('tr[data-file="logs"] a').click();
    await page.locator('tr[data-file="t.stdout.0"] a').click();
    const text = await page.locator('#file-content').textContent();
    assert(/tick \d+/.test(text), `the log shows: ${text.slice(0, 200)}`);
    await shot(page, 'files');
  });

  await check('the node page shows drivers with their health', async () => {
    await page.getByRole('link', { name: 'Node', exact: true }).click();
    await page.getByRole('heading', { name: 'Drivers' }).waitFor();
    await page.locator('tr[data-driver="raw_exec"] .status', { hasText: 'healthy' }).waitFor();
    // The node's charts, and the ticker's allocation laid out by its share of the node.
    await page.waitForFunction(() => [...document.querySelectorAll('#usage figure.chart')]
      .every((c) => c.querySelectorAll('circle').length >= 2), null, { timeout: 20000 });
    const seg = page.locator('.share-bar[data-resource="cpu"] a.share').first();
    assert(/ticker \/ g .*: 50 MHz/.test(await seg.getAttribute('title')), 'the ticker\'s CPU share');
    assert(Number((await seg.getAttribute('style')).match(/width: ([\d.]+)%/)[1]) > 0, 'a segment with no width');
    await shot(page, 'node');
  });

  await check('the components page lists the loaded components with their calls', async () => {
    await page.getByRole('link', { name: 'Components', exact: true }).click();
    await page.locator('section[data-component="raw_exec"]').waitFor();
    const text = await page.locator('section[data-component="raw_exec"]').textContent();
    assert(/Latency p50 \/ p99/.test(text) && /Calls\s*[1-9]/.test(text), `raw_exec shows no calls: ${text}`);
    await shot(page, 'components');
  });

  await check('a variable is listed, read and edited with a check-and-set', async () => {
    const put = (items, cas) => fetch(BASE + '/v1/var/app/config' + (cas ? '?cas=' + cas : ''), {
      method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ Items: items }) });
    assert((await put({ a: '1' })).ok, 'writing the variable');
    await page.getByRole('link', { name: 'Variables', exact: true }).click();
    await page.locator('tr[data-var="app/config"] a').click();
    await page.getByRole('heading', { name: /^Variable/ }).waitFor();
    await page.locator('tr[data-item="a"]').waitFor();
    await page.locator('#var-items').fill('a=2\nb=three');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.locator('#action-result', { hasText: 'Saved (index' }).waitFor();
    const v = await (await fetch(BASE + '/v1/var/app/config')).json();
    assert(v.Items.a === '2' && v.Items.b === 'three', `saved ${JSON.stringify(v.Items)}`);
    // Changed elsewhere meanwhile: the page's save is refused, not lost silently.
    assert((await put({ a: 'other' }, v.ModifyIndex)).ok, 'the other write');
    await page.locator('#var-items').fill('a=mine');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.locator('#action-result', { hasText: 'changed since' }).waitFor();
    const after = await (await fetch(BASE + '/v1/var/app/config')).json();
    assert(after.Items.a === 'other', `overwritten: ${JSON.stringify(after.Items)}`);
    await shot(page, 'variable');
  });

  await check('a parameterized job is dispatched and a periodic one forced from their pages', async () => {
    const batch = (id, extra) => ({ Job: Object.assign({ ID: id, Type: 'batch', TaskGroups: [{ Name: 'g',
      Tasks: [{ Name: 't', Driver: 'mock', Config: { run_for: '10ms' } }] }] }, extra) });
    await submit(BASE, batch('param', { ParameterizedJob: { MetaOptional: ['who'] } }));
    await submit(BASE, batch('cron', { Periodic: { Enabled: true, Spec: '0 0 1 1 *', SpecType: 'cron' } }));
    await page.goto(BASE + '/ui/jobs/param');
    await page.getByRole('heading', { name: 'Children' }).waitFor();
    await page.locator('#dispatch-meta').fill('who=browser');
    await page.locator('#dispatch-payload').fill('hello');
    await page.getByRole('button', { name: 'Dispatch' }).click();
    await page.locator('#action-result', { hasText: 'Dispatched param/dispatch-' }).waitFor();
    await page.locator('tr[data-child^="param/dispatch-"]').waitFor({ timeout: 20000 });
    await page.goto(BASE + '/ui/jobs/cron');
    await page.getByRole('button', { name: 'Force a launch of cron' }).click();
    await page.locator('tr[data-child^="cron/periodic-"]').waitFor({ timeout: 20000 });
    await shot(page, 'children');
    // The children stay off the jobs list, which shows their parents.
    await page.goto(BASE + '/ui/jobs');
    await page.locator('tr[data-job="cron"]').waitFor();
    assert(await page.locator('tr[data-job^="cron/"]').count() === 0, 'a child is on the jobs list');
  });

  await check('the job editor plans a job, shows its diff and runs it', async () => {
    await page.goto(BASE + '/ui/jobs');
    await page.getByRole('link', { name: 'Run a job' }).click();
    await page.getByRole('heading', { name: 'Run a job' }).waitFor();
    const hcl = (count) => `job "edited" {
  type = "batch"
  group "g" {
    count = ${count}
    task "t" {
      driver = "mock"
      config { run_for = "\${var.d}" }
    }
  }
}
variable "d" { default = "1s" }
`;
    await page.locator('#job-source').fill(hcl(1));
    await page.getByRole('button', { name: 'Plan' }).click();
    await page.locator('#plan-result .diff-job.added', { hasText: 'Job: "edited"' }).waitFor();
    await page.locator('#plan-result li[data-group="g"]', { hasText: '1 create' }).waitFor();
    await page.locator('#plan-placement', { hasText: 'All tasks successfully allocated' }).waitFor();
    await page.getByRole('button', { name: 'Run' }).click();
    await page.waitForURL(/\/ui\/jobs\/edited/);
    await page.getByRole('heading', { name: 'Job edited' }).waitFor();
    // Edit: the page opens the HCL it was run with; a change plans as an edit.
    await page.getByRole('link', { name: 'Edit' }).click();
    await page.getByRole('heading', { name: 'Edit job edited' }).waitFor();
    assert((await page.locator('#job-source').inputValue()).includes('variable "d"'), 'the source kept');
    await page.locator('summary', { hasText: 'Variables' }).click();
    await page.locator('#job-vars').fill('d = "2s"');
    await page.locator('#job-source').fill(hcl(2));
    await page.getByRole('button', { name: 'Plan' }).click();
    await page.locator('#plan-result .diff-job.edited').waitFor();
    await page.locator('#plan-result').getByText('+/- Count: "1" => "2"', { exact: true }).waitFor();
    await shot(page, 'editor');
    // Changed elsewhere after the plan: Run is refused, nothing is overwritten.
    const job = await (await fetch(BASE + '/v1/job/edited')).json();
    job.Meta = { other: 'writer' };
    assert((await fetch(BASE + '/v1/jobs', { method: 'POST', body: JSON.stringify({ Job: job }) })).ok, 'the other write');
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('#action-result', { hasText: 'Run failed' }).waitFor();
    const after = await (await fetch(BASE + '/v1/job/edited')).json();
    assert(after.TaskGroups[0].Count === 1 && after.Meta.other === 'writer', 'the other write was overwritten');
    // Planned again, it runs, and the variable reached the job.
    await page.getByRole('button', { name: 'Plan' }).click();
    await page.locator('#plan-result .diff-job.edited').waitFor();
    await page.getByRole('button', { name: 'Run' }).click();
    await page.waitForURL(/\/ui\/jobs\/edited/);
    const run = await (await fetch(BASE + '/v1/job/edited')).json();
    assert(run.TaskGroups[0].Count === 2 && run.TaskGroups[0].Tasks[0].Config.run_for === '2s', `ran ${JSON.stringify(run.TaskGroups[0])}`);
  });

  await check('the evaluations page lists the jobs\' evaluations', async () => {
    await page.getByRole('link', { name: 'Evaluations', exact: true }).click();
    await page.getByRole('heading', { name: 'Evaluations', level: 1 }).waitFor();
    const row = page.locator('table.evals tr', { hasText: 'ticker' }).first();
    await row.waitFor();
    assert(/job-register/.test(await row.textContent()), 'the ticker\'s registration');
    await shot(page, 'evaluations');
  });

  await check('a long log opens at its last 64 KiB', async () => {
    const job = tickerJob('chatty');
    job.Job.TaskGroups[0].Tasks[0].Config.args = ['-c',
      'i=0; while [ $i -lt 4000 ]; do echo "line $i ............................................................"; i=$((i+1)); done; echo END; exec sleep 600'];
    await submit(BASE, job);
    await page.goto(BASE + '/ui/jobs/chatty');
    await page.locator('table.allocs a').first().waitFor({ timeout: 20000 });
    await page.locator('table.allocs a').first().click();
    await page.locator('#log', { hasText: 'END' }).waitFor({ timeout: 20000 });
    const text = await page.locator('#log').textContent();
    assert(!text.includes('line 0 '), 'the log starts at its beginning');
    assert(text.length <= 64 * 1024 + 4 && text.length > 60 * 1024, `${text.length} characters shown`);
  });

  await check('a narrow screen scrolls no page sideways', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    for (const path of ['/ui/jobs', '/ui/node', '/ui/components', '/ui/variables', '/ui/evaluations', '/ui/run']) {
      await page.goto(BASE + path);
      const over = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert(over <= 1, `${path} is ${over}px wider than the screen`);
    }
    await page.goto(BASE + '/ui/jobs');
    await shot(page, 'jobs-narrow');
  });

  // An agent with an ACL token.
  const tctx = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const tpage = await tctx.newPage();
  tpage.on('dialog', (d) => d.accept());

  await check('a token-protected agent shows the 403 and asks for the token', async () => {
    const r = await tpage.goto(TBASE + '/ui/jobs');
    assert(r.status() === 403, `status ${r.status()}`);
    await tpage.getByRole('heading', { name: /403/ }).waitFor();
    await tpage.getByText('requires an ACL token').waitFor();
    await shot(tpage, 'login');
  });

  await check('a wrong token is refused and says so', async () => {
    await tpage.getByLabel('ACL token').fill('not-the-token');
    const [r] = await Promise.all([tpage.waitForNavigation(), tpage.getByRole('button', { name: 'Sign in' }).click()]);
    assert(r.status() === 403, `status ${r.status()}`);
    await tpage.getByText('not valid').waitFor();
  });

  await check('with the token the pages and their live parts work', async () => {
    await tpage.getByLabel('ACL token').fill(TOKEN);
    await Promise.all([tpage.waitForURL(TBASE + '/ui/jobs'), tpage.getByRole('button', { name: 'Sign in' }).click()]);
    await tpage.getByRole('heading', { name: 'Jobs', level: 1 }).waitFor();
    const cookie = (await tctx.cookies()).find((c) => c.name === 'paddock_ui_token');
    assert(cookie && cookie.httpOnly && cookie.sameSite === 'Strict' && cookie.path === '/ui', `cookie ${JSON.stringify(cookie)}`);
    assert(await tpage.evaluate(() => sessionStorage.getItem('paddock.token')) === TOKEN, 'token not kept in sessionStorage');
    assert(await tpage.evaluate(() => document.cookie) === '', 'the cookie is readable from scripts');
    await tpage.evaluate(() => { window.__sameDocument = true; });
    await submit(TBASE, tickerJob('guarded'), TOKEN);
    await tpage.locator('tr[data-job="guarded"]').waitFor({ timeout: 20000 });
    await tpage.getByRole('button', { name: 'Stop job guarded' }).click();
    await tpage.locator('tr[data-job="guarded"] .status', { hasText: 'dead' }).waitFor({ timeout: 20000 });
    assert(await tpage.evaluate(() => window.__sameDocument === true), 'the page was reloaded');
    await tpage.goto(TBASE + '/ui/node');
    await tpage.getByRole('heading', { name: 'Drivers' }).waitFor();
  });
} finally {
  await browser.close();
}
console.log(`${passed} passed, 0 failed`);
