/**
 * The web console in a real browser (Debian's Chromium driven by playwright-core): a person's path through
 * every page, XSS and cross-site forgery attempts, an axe-core check of each page, and screenshots at
 * 1280 and 375 px. Most of it needs no VM (a VM's status is moved in its row as the reconciler would);
 * the part that runs an echo task in a real VM needs AGENTVM_TEST_IMAGE_DIR, like vm-real.test.ts.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer, get as httpGet, type Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { detached, freshDb, ManualClock, killQemusUnder, seedSnapshots, until } from './helpers.ts';
import { startConsoleServer, type ConsoleServer } from './consoleServer.ts';
import { buildCoreServices, buildServices } from '../src/domain/services.ts';
import { SESSION_TTL_MS } from '../src/domain/sessions.ts';
import * as runStore from '../src/store/runs.ts';
import { newId } from '../src/domain/ids.ts';
import { loadConfig } from '../src/config.ts';
import { startServer, type RunningServer } from '../src/server.ts';
import { createLogger } from '../src/log.ts';

const CHROMIUM = '/usr/bin/chromium';
const noBrowser = existsSync(CHROMIUM) ? false : `no browser: ${CHROMIUM} is missing (Debian's chromium package; scripts/install-debs.sh installs it)`;
const imageDir = process.env.AGENTVM_TEST_IMAGE_DIR;
const require = createRequire(import.meta.url);
const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const XSS_NAME = '<img src=x onerror=alert(1)>';
const XSS_TASK = '<script>alert(1)</script> and <img src=x onerror=alert(2)>';

let shotDir: string | undefined;
async function screenshotDir(): Promise<string> {
  if (!shotDir) {
    shotDir = process.env.AGENTVM_SCREENSHOT_DIR ?? (await mkdtemp(path.join(os.tmpdir(), 'agentvm-console-shots-')));
    await mkdir(shotDir, { recursive: true });
    console.log(`console screenshots: ${shotDir}`);
  }
  return shotDir;
}

async function launch(): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
}

/**
 * What a page did that it must not: a dialog (script from data ran), a page error, a CSP refusal (Chromium says
 * it on the console, and the page's own securitypolicyviolation listener says it again, with what was refused).
 */
async function watch(page: Page) {
  const seen = { dialogs: [] as string[], errors: [] as string[] };
  await page.addInitScript(() =>
    document.addEventListener('securitypolicyviolation', (e) => console.error(`CSP violation: ${e.violatedDirective} refused ${e.blockedURI} ${e.sample}`)),
  );
  page.on('dialog', (d) => {
    seen.dialogs.push(d.message());
    void d.dismiss();
  });
  page.on('pageerror', (e) => seen.errors.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/status of (400|401|403|404|409|503)/.test(m.text())) seen.errors.push(`console: ${m.text()}`);
  });
  return seen;
}

/** axe-core on the page as it is: no serious or critical violation. */
async function axeCheck(page: Page, name: string) {
  await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run: (ctx: Document, o: object) => Promise<{ violations: { id: string; impact: string; nodes: { target: string[] }[] }[] }> } }).axe;
    const r = await axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, targets: v.nodes.map((n) => n.target.join(' ')).slice(0, 3) }));
  });
  const bad = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  assert.deepEqual(bad, [], `${name}: accessibility violations`);
}

/** A full-page screenshot at 1280 and at 375 px wide, then back to 1280. */
async function screenshots(page: Page, name: string) {
  const dir = await screenshotDir();
  for (const width of [1280, 375]) {
    await page.setViewportSize({ width, height: width === 375 ? 812 : 900 });
    await page.waitForTimeout(150);
    await page.screenshot({ path: path.join(dir, `${name}-${width}.png`), fullPage: true });
    if (width === 375) {
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 1, `${name} at 375 px scrolls sideways by ${overflow} px`);
    }
  }
  await page.setViewportSize({ width: 1280, height: 900 });
}

async function signIn(page: Page, server: { url: string; codeFromLog: (email: string) => string }, email: string) {
  await page.goto(`${server.url}/console/vms`);
  assert.match(page.url(), /\/console\/login\?next=/);
  await page.getByLabel('Email').fill(email);
  await page.getByRole('button', { name: 'Email me a code' }).click();
  await page.getByLabel('Code').waitFor();
  await page.getByLabel('Code').fill(server.codeFromLog(email));
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(/\/console\/vms$/);
}

const ledgerRows = async (s: ConsoleServer, tenantId: string) =>
  (await s.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ledger WHERE tenant_id = $1 AND kind = 'card_charge'`, [tenantId]))[0].n;

describe('web console in a real browser', { skip: noBrowser }, () => {
  let server: ConsoleServer;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let seen: Awaited<ReturnType<typeof watch>>;
  let tenant: { tenantId: string; email: string; key: string };
  let vmId: string;
  let drop: () => Promise<void>;

  before(async () => {
    const fresh = await freshDb({ name: 'pglite' });
    drop = fresh.drop;
    server = await startConsoleServer(fresh.db);
    tenant = await server.tenant();
    browser = await launch();
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    seen = await watch(page);
  });
  after(async () => {
    await browser?.close();
    await server?.close();
    await drop?.();
  });

  test('sign in with the code from the server log; the session cookie is HttpOnly and SameSite', async () => {
    await page.goto(`${server.url}/console/login`);
    await axeCheck(page, 'sign in');
    await screenshots(page, 'login');
    await signIn(page, server, tenant.email);
    assert.equal(await page.getByRole('heading', { level: 1 }).textContent(), 'VMs');
    const cookie = (await context.cookies()).find((c) => c.name === 'avm_session')!;
    assert.ok(cookie, 'a session cookie');
    assert.equal(cookie.httpOnly, true);
    assert.equal(cookie.sameSite, 'Lax');
    assert.equal(cookie.path, '/console');
    assert.equal(cookie.secure, false, 'plain HTTP on loopback: not Secure');
    const res = await fetch(`${server.url}/console/vms`, { headers: { cookie: `avm_session=${cookie.value}` }, redirect: 'manual' });
    const csp = res.headers.get('content-security-policy')!;
    assert.match(csp, /script-src 'self'/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
  });

  test('create a VM: the price shows before anything is charged, then one charge', async () => {
    await page.getByLabel('Plan or tier').selectOption('plan:pro');
    await page.locator('#quote', { hasText: '$49.00 per month' }).waitFor();
    await axeCheck(page, 'VMs');
    await screenshots(page, 'vms-empty');
    await page.getByRole('button', { name: 'Review and create' }).click();
    await page.waitForURL(/\/console\/vms\/new\?/);
    assert.match(await page.locator('#price').textContent() ?? '', /\$49\.00 per month/);
    assert.equal(await ledgerRows(server, tenant.tenantId), 0, 'nothing is charged by the review');
    await axeCheck(page, 'review');
    await screenshots(page, 'vm-review');
    await page.getByRole('button', { name: 'Pay $49.00 and create' }).click();
    await page.waitForURL(/\/console\/vms\/vm_[A-Za-z0-9]+\?done=created$/);
    vmId = /vms\/(vm_[A-Za-z0-9]+)/.exec(page.url())![1];
    assert.equal(await ledgerRows(server, tenant.tenantId), 1);
    const [charge] = await server.db.query<{ amount_cents: number }>(`SELECT amount_cents::int FROM ledger WHERE tenant_id = $1 AND kind = 'card_charge'`, [tenant.tenantId]);
    assert.equal(charge.amount_cents, 4900);
    assert.match(await page.locator('#facts').textContent() ?? '', /provisioning/);
  });

  test('the VM list updates its statuses by itself', async () => {
    await page.goto(`${server.url}/console/vms`);
    const row = page.locator('#vm-rows tr', { hasText: vmId });
    await row.locator('[data-status="provisioning"]').waitFor();
    await page.evaluate(() => ((window as unknown as { stillHere: boolean }).stillHere = true));
    // What the reconciler does when the guest says hello (no VM host in this part of the test).
    await server.db.query(`UPDATE vms SET status = 'running', ipv4 = '10.0.2.15' WHERE vm_id = $1`, [vmId]);
    await row.locator('[data-status="running"]').waitFor({ timeout: 10_000 });
    assert.equal(await page.evaluate(() => (window as unknown as { stillHere?: boolean }).stillHere), true, 'no reload: the row was swapped in place');
    await axeCheck(page, 'VMs with a VM');
    await screenshots(page, 'vms');
  });

  test('a task streams its output as it comes; task and output with markup show as text', async () => {
    // A run as the VM's host records it: queued, running, output events as they come, then the end.
    const runId = newId('run');
    await runStore.insert(server.db, {
      run_id: runId, tenant_id: tenant.tenantId, vm_id: vmId, task: XSS_TASK, harness: 'echo', model: null, provider: null,
      argv: ['echo'], env: {}, timeout_ms: 60_000, max_output_bytes: 1 << 20, boots: 0, created_at: new Date(),
    });
    await runStore.markRunning(server.db, runId, new Date());
    await page.goto(`${server.url}/console/vms/${vmId}/runs/${runId}`);
    await page.locator('#run-progress').waitFor();
    assert.equal(await page.locator('#run-status .status').textContent(), 'running');
    assert.equal(await page.locator('.task-text').textContent(), XSS_TASK);
    await runStore.appendEvents(server.db, runId, [{ seq: 1, stream: 'stdout', text: `first line ${XSS_NAME}\n` }]);
    await server.services.runFeed.publish({ run_id: runId });
    await page.locator('#run-output', { hasText: `first line ${XSS_NAME}` }).waitFor({ timeout: 10_000 });
    await screenshots(page, 'run-streaming');
    await runStore.appendEvents(server.db, runId, [{ seq: 2, stream: 'stderr', text: 'a warning\n' }, { seq: 3, stream: 'stdout', text: 'done\n' }]);
    await runStore.finish(server.db, runId, { status: 'succeeded', exit_code: 0, timed_out: false, duration_ms: 1234, first_output_ms: 10, status_reason: null, finished_at: new Date() });
    await server.services.runFeed.publish({ run_id: runId, finished: true });
    await page.locator('#run-output[data-finished="succeeded"]').waitFor({ timeout: 10_000 });
    assert.equal(await page.locator('#run-output').textContent(), `first line ${XSS_NAME}\na warning\ndone\n`);
    assert.equal(await page.locator('#run-output .stderr').textContent(), 'a warning\n');
    assert.equal(await page.locator('#run-exit').textContent(), '0');
    assert.equal(await page.locator('#run-output img, .task-text img, script:not([src])').count(), 0);
    await axeCheck(page, 'run');
    await screenshots(page, 'run');
    // The same run on the VM's page, in its history, as text.
    await page.goto(`${server.url}/console/vms/${vmId}`);
    assert.match(await page.locator('.task-cell a').first().textContent() ?? '', /<script>alert\(1\)<\/script>/);
    assert.deepEqual(seen.dialogs, [], 'no script from data ran');
  });

  test("a refused task shows the API's message and hint, as the API says them", async () => {
    await page.goto(`${server.url}/console/vms/${vmId}`);
    await page.getByLabel(/Task for/).fill('hello');
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await page.locator('.problem').waitFor();
    const api = await fetch(`${server.url}/v1/api/vms/${vmId}/run`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tenant.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ task: 'hello' }),
    });
    const body = (await api.json()) as { error: string; message: string; hint?: string };
    assert.ok(api.status >= 400);
    assert.equal(await page.locator('.problem-message strong').textContent(), body.message || 'Something went wrong on our side.');
    assert.equal(await page.locator('.problem-code').textContent(), body.error);
    if (body.hint) assert.equal(await page.locator('.problem-hint').textContent(), body.hint);
  });

  test("the egress policy is saved; bad input shows the API's message and changes nothing", async () => {
    await page.goto(`${server.url}/console/vms/${vmId}`);
    await page.getByLabel('What the VM may reach').selectOption('allowlist');
    await page.getByLabel('Allowed hosts, one a line').fill('api.example.com\n*.example.org');
    await page.getByRole('button', { name: 'Save policy' }).click();
    await page.locator('.notice', { hasText: 'Egress policy saved' }).waitFor();
    const [vm] = await server.db.query<{ egress: { mode: string; allow: string[] } }>('SELECT egress FROM vms WHERE vm_id = $1', [vmId]);
    assert.deepEqual({ mode: vm.egress.mode, allow: [...vm.egress.allow].sort() }, { mode: 'allowlist', allow: ['*.example.org', 'api.example.com'] });
    await page.getByLabel('Allowed hosts, one a line').fill('not a host!');
    await page.getByRole('button', { name: 'Save policy' }).click();
    await page.locator('.problem').waitFor();
    const [after] = await server.db.query<{ egress: { allow: string[] } }>('SELECT egress FROM vms WHERE vm_id = $1', [vmId]);
    assert.deepEqual([...after.egress.allow].sort(), ['*.example.org', 'api.example.com'], 'bad input changes nothing');
    await page.goto(`${server.url}/console/vms/${vmId}`);
    // No VM host runs it here: the files section says why, in the API's words, and the rest of the page works.
    assert.match(await page.locator('#files .section-problem').textContent() ?? '', /no VM host is attached to this server.*unavailable/);
    await axeCheck(page, 'VM');
    await screenshots(page, 'vm');
  });

  test('the terminal page: xterm.js opens under the CSP (nonce for its styles); without a VM host, the refusal in the API\'s words', async () => {
    await page.goto(`${server.url}/console/vms/${vmId}`);
    // "Open terminal" asks the API for a ticket first: its refusal shows on the VM page.
    await page.locator('#terminal').getByRole('button', { name: 'Open terminal' }).click();
    await page.locator('.problem', { hasText: 'no VM host is attached to this server' }).waitFor();
    assert.equal(await page.locator('.problem-code').textContent(), 'unavailable');
    // The page itself (a reload, a bookmark): its script asks for a ticket and says why there is none.
    const res = await page.goto(`${server.url}/console/vms/${vmId}/terminal`);
    const csp = res!.headers()['content-security-policy'];
    const nonce = /style-src 'self' 'nonce-([A-Za-z0-9+/=]+)'/.exec(csp)?.[1];
    assert.ok(nonce && nonce.length >= 22, `a style nonce in ${csp}`);
    assert.match(csp, /script-src 'self';/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    assert.ok(!(await page.content()).includes(nonce!), 'the nonce is not readable from the markup');
    const again = await fetch(`${server.url}/console/vms/${vmId}/terminal`, { headers: { cookie: `avm_session=${(await context.cookies()).find((c) => c.name === 'avm_session')!.value}` } });
    assert.notEqual(/'nonce-([^']+)'/.exec(again.headers.get('content-security-policy')!)?.[1], nonce, 'a nonce per response');
    await page.locator('#terminal-status[data-state="failed"]').waitFor();
    assert.match(await page.locator('#terminal-status').textContent() ?? '', /no VM host is attached to this server \(unavailable\)/);
    // xterm.js rendered, its three <style> elements applied with the nonce.
    await page.locator('#terminal-screen .xterm-screen').waitFor();
    assert.deepEqual(await page.evaluate(() => [...document.querySelectorAll('#terminal-screen style')].map((s) => (s as HTMLStyleElement).sheet !== null)), [true, true, true]);
    assert.match(await page.locator('#terminal-size').textContent() ?? '', /^\d+ × \d+$/);
    assert.equal(await page.getByRole('button', { name: 'Reconnect' }).isVisible(), true);
    assert.equal(await page.getByRole('button', { name: 'Disconnect' }).isVisible(), false);
    // Other pages keep the plain policy and never load the terminal's script.
    const vmRes = await fetch(`${server.url}/console/vms/${vmId}`, { headers: { cookie: `avm_session=${(await context.cookies()).find((c) => c.name === 'avm_session')!.value}` } });
    assert.match(vmRes.headers.get('content-security-policy')!, /style-src 'self';/);
    assert.doesNotMatch(await vmRes.text(), /xterm|terminal\.js/);
    await axeCheck(page, 'terminal, not connected');
    await screenshots(page, 'terminal-no-host');
    assert.deepEqual(seen.errors, [], 'no script errors and no Content-Security-Policy refusals');
  });

  test('idle stop and expiry are saved from the VM page; bad input changes nothing', async () => {
    const lifetime = async () => (await server.db.query<{ auto_stop_after_s: number | null; expires_at: Date | null }>('SELECT auto_stop_after_s, expires_at FROM vms WHERE vm_id = $1', [vmId]))[0];
    await page.goto(`${server.url}/console/vms/${vmId}`);
    const expires = new Date(Date.now() + 7 * 86_400_000).toISOString().slice(0, 19) + 'Z';
    await page.getByLabel(/Stop when idle for/).fill('30');
    await page.getByLabel(/Destroy at/).fill(expires);
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.locator('.notice', { hasText: 'Idle stop and expiry saved' }).waitFor();
    let row = await lifetime();
    assert.equal(row.auto_stop_after_s, 1800);
    assert.equal(row.expires_at?.toISOString().slice(0, 19) + 'Z', expires);
    assert.match(await page.locator('#lifetime').textContent() ?? '', /after 30 min/);
    await page.getByLabel(/Destroy at/).fill('next tuesday');
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.locator('.problem', { hasText: 'expires_at' }).waitFor();
    row = await lifetime();
    assert.equal(row.auto_stop_after_s, 1800, 'bad input changes nothing');
    await page.getByLabel(/Stop when idle for/).fill('');
    await page.getByLabel(/Destroy at/).fill('');
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.locator('.notice', { hasText: 'Idle stop and expiry saved' }).waitFor();
    row = await lifetime();
    assert.deepEqual([row.auto_stop_after_s, row.expires_at], [null, null]);
  });

  test('templates: search, sort, page, fork (price first) and capture; a name with markup is text', async () => {
    await server.db.query(
      `INSERT INTO templates (template_id, tenant_id, slug, name, description, harness, visibility, tags, forks, stars, size_bytes, status)
       SELECT 'tpl_console' || g, NULL, 'console-' || g, 'workspace ' || g, 'a python starter number ' || g, 'echo', 'public',
              ARRAY['python'], g, g % 7, 1048576 * g, 'ready'
       FROM generate_series(1, 60) g`,
    );
    await server.db.query(
      `INSERT INTO templates (template_id, tenant_id, slug, name, description, harness, visibility, tags, forks, stars, size_bytes, status)
       VALUES ('tpl_consolexss', NULL, 'xss', $1, $1, 'echo', 'public', ARRAY['xss'], 0, 0, 0, 'ready')`,
      [XSS_NAME],
    );
    const [{ n: visible }] = await server.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM templates WHERE visibility = 'public' OR tenant_id = $1`, [tenant.tenantId]);
    await page.goto(`${server.url}/console/templates`);
    assert.match(await page.locator('p[role="status"]').textContent() ?? '', new RegExp(`^${visible} templates`));
    await axeCheck(page, 'templates');
    await screenshots(page, 'templates');
    await page.getByRole('link', { name: 'Next →' }).click();
    await page.waitForURL(/offset=24/);
    assert.equal(await page.locator('.tpl').count(), 24);
    await page.getByLabel('Sort by').selectOption('forks');
    await page.getByLabel('Search').fill('onerror');
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.waitForURL(/q=onerror/);
    assert.equal(await page.locator('.tpl-name').count(), 1);
    assert.equal(await page.locator('.tpl-name').textContent(), XSS_NAME);
    assert.equal(await page.locator('.tpl img').count(), 0);
    await page.getByLabel('Search').fill('');
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.waitForURL(/sort=forks/);
    assert.equal(await page.locator('.tpl-name').first().textContent(), 'workspace 60', 'most forked first');

    const charges = await ledgerRows(server, tenant.tenantId);
    await page.getByRole('link', { name: 'Fork workspace 60' }).click();
    await page.waitForURL(/\/fork$/);
    assert.match(await page.locator('form').last().textContent() ?? '', /\$19\.00 charged now/);
    assert.equal(await ledgerRows(server, tenant.tenantId), charges);
    await axeCheck(page, 'fork');
    await screenshots(page, 'fork');
    await page.getByRole('button', { name: 'Pay and fork' }).click();
    await page.waitForURL(/\/console\/vms\/vm_[A-Za-z0-9]+\?done=forked$/);
    assert.equal(await ledgerRows(server, tenant.tenantId), charges + 1);
    assert.match(await page.locator('#facts').textContent() ?? '', /tpl_console60/);

    await page.goto(`${server.url}/console/templates`);
    await page.getByLabel('VM', { exact: true }).selectOption(vmId);
    await page.getByLabel('Template name').fill('my console capture');
    await page.getByRole('button', { name: 'Capture' }).click();
    await page.locator('.notice', { hasText: 'Capturing' }).waitFor();
    assert.equal(await page.locator('.tpl-name').first().textContent(), 'my console capture');
    assert.deepEqual(seen.dialogs, []);
  });

  test('billing shows the card, credits and a chart of spend', async () => {
    await page.goto(`${server.url}/console/billing`);
    assert.match(await page.locator('.stats').textContent() ?? '', /visa •••• 4242/);
    assert.match(await page.locator('.stats').textContent() ?? '', /\$50\.00/);
    await page.locator('#spend-chart canvas').waitFor();
    assert.match(await page.locator('#spend-h').locator('..').textContent() ?? '', /\$68\.00/, '$49 + $19 today');
    await axeCheck(page, 'billing');
    await screenshots(page, 'billing');
  });

  test('keys: a new key is shown once and works; revoked, it stops working', async () => {
    await page.goto(`${server.url}/console/keys`);
    await page.getByLabel('Label').fill('ci runner');
    await page.getByLabel('Scope').selectOption('readwrite');
    await page.getByRole('button', { name: 'Issue key' }).click();
    const key = await page.getByLabel('Key (readwrite)').inputValue();
    assert.match(key, /^avm_live_[A-Za-z0-9]{40}$/);
    await axeCheck(page, 'key issued');
    await screenshots(page, 'key-issued');
    const whoami = () => fetch(`${server.url}/v1/api/whoami`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal((await whoami()).status, 200);
    await page.goto(`${server.url}/console/keys`);
    assert.ok(!(await page.content()).includes(key), 'the plaintext is shown only once');
    await axeCheck(page, 'keys');
    await screenshots(page, 'keys');
    await page.getByRole('button', { name: 'Revoke key ci runner' }).click();
    await page.locator('.notice', { hasText: 'revoked' }).waitFor();
    assert.equal(await page.getByRole('button', { name: 'Revoke key ci runner' }).count(), 0);
    await until('the key refused', async () => (await whoami()).status === 401, 2000);
  });

  test('events: what happened, oldest first, with its data as text', async () => {
    await page.goto(`${server.url}/console/events`);
    const rows = page.locator('#event-rows tbody tr');
    assert.ok((await rows.count()) >= 2);
    assert.match(await rows.first().textContent() ?? '', /key\.issued/, "oldest first: the tenant's first key");
    assert.equal(await rows.filter({ hasText: 'vm.created' }).first().locator('td[data-label="About"]').textContent(), vmId);
    await axeCheck(page, 'events');
    await screenshots(page, 'events');
    const [{ n }] = await server.db.query<{ n: number }>('SELECT count(*)::int AS n FROM events WHERE tenant_id = $1', [tenant.tenantId]);
    assert.equal(await rows.count(), Math.min(n, 50));
  });

  test('webhooks: the secret shows once; deliveries are listed as text; delete asks first', async () => {
    const hooks = async () => server.db.query<{ webhook_id: string; secret: string; events: string[] }>('SELECT webhook_id, secret, events FROM webhooks WHERE tenant_id = $1', [tenant.tenantId]);
    await page.goto(`${server.url}/console/webhooks`);
    await axeCheck(page, 'webhooks');
    await page.getByLabel('URL').fill('http://hooks.example.com/agentvm');
    await page.getByRole('button', { name: 'Add webhook' }).click();
    await page.locator('.problem', { hasText: 'https' }).waitFor();
    assert.equal((await hooks()).length, 0, 'bad input creates nothing');
    assert.equal(await page.getByLabel('URL').inputValue(), 'http://hooks.example.com/agentvm', 'the form keeps what was typed');
    await page.getByLabel('URL').fill('https://hooks.example.com/agentvm');
    for (const box of await page.locator('.checks input').all()) if ((await box.getAttribute('value')) !== 'key.issued') await box.uncheck();
    await page.getByRole('button', { name: 'Add webhook' }).click();
    const secret = await page.getByLabel('Signing secret').inputValue();
    const [hook] = await hooks();
    assert.equal(secret, hook.secret);
    assert.deepEqual(hook.events, ['key.issued']);
    await axeCheck(page, 'webhook created');
    await screenshots(page, 'webhook-created');
    await page.goto(`${server.url}/console/webhooks`);
    assert.ok(!(await page.content()).includes(secret), 'the secret is shown only once');
    await screenshots(page, 'webhooks');

    // An event of the kind it asks for makes a delivery; the receiver's error is shown as text.
    const issued = await fetch(`${server.url}/v1/api/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tenant.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ label: 'for a delivery', scope: 'read' }),
    });
    assert.equal(issued.status, 201);
    await server.db.query(`UPDATE webhook_deliveries SET status = 'failed', attempts = 3, last_status_code = 500, last_error = $2, last_attempt_at = now() WHERE webhook_id = $1`, [hook.webhook_id, XSS_NAME]);
    await page.getByRole('link', { name: 'Deliveries of https://hooks.example.com/agentvm' }).click();
    await page.waitForURL(/\/console\/webhooks\/wh_/);
    const delivery = page.locator('#delivery-rows tbody tr');
    assert.equal(await delivery.count(), 1);
    assert.match(await delivery.textContent() ?? '', /key\.issued/);
    assert.equal(await delivery.locator('.delivery-answer').textContent(), `HTTP 500 · ${XSS_NAME}`);
    assert.equal(await delivery.locator('[data-status]').textContent(), 'failed');
    assert.equal(await page.locator('#delivery-rows img').count(), 0);
    await axeCheck(page, 'deliveries');
    await screenshots(page, 'deliveries');

    await page.goto(`${server.url}/console/webhooks`);
    await page.getByRole('link', { name: 'Delete webhook https://hooks.example.com/agentvm' }).click();
    await axeCheck(page, 'delete webhook');
    assert.equal((await hooks()).length, 1, 'nothing deleted by the confirmation page');
    await page.getByRole('button', { name: 'Delete webhook' }).click();
    await page.locator('.notice', { hasText: 'webhook was deleted' }).waitFor();
    assert.equal((await hooks()).length, 0);
    assert.deepEqual(seen.dialogs, []);
  });

  test('the ledger lists every entry, newest first, in pages; descriptions are text', async () => {
    await server.db.query(
      `INSERT INTO ledger (tenant_id, kind, amount_cents, credits_delta_cents, vm_id, description, created_at)
       SELECT $1, 'credit_draw', g, -g, $2, CASE WHEN g = 30 THEN $3 ELSE 'running time ' || g END, now() + g * interval '1 second'
       FROM generate_series(1, 30) g`,
      [tenant.tenantId, vmId, XSS_NAME],
    );
    const [{ n }] = await server.db.query<{ n: number }>('SELECT count(*)::int AS n FROM ledger WHERE tenant_id = $1', [tenant.tenantId]);
    await page.goto(`${server.url}/console/billing`);
    await page.getByRole('link', { name: 'Ledger' }).click();
    await page.waitForURL(/\/console\/billing\/ledger$/);
    const rows = page.locator('#ledger-rows tbody tr');
    assert.equal(await rows.count(), 25);
    assert.equal(await rows.first().locator('td[data-label="Description"]').textContent(), XSS_NAME, 'newest first, as text');
    assert.match(await rows.first().textContent() ?? '', /−\$0\.30/);
    assert.match(await page.locator('.pager').textContent() ?? '', new RegExp(`1–25 of ${n}`));
    await axeCheck(page, 'ledger');
    await screenshots(page, 'ledger');
    await page.getByRole('link', { name: 'Next →' }).click();
    await page.waitForURL(/offset=25/);
    assert.equal(await rows.count(), n - 25);
    assert.equal(await page.locator('#ledger-rows img').count(), 0);
  });

  test('a cross-site form POST is refused, and so is a same-site one without the CSRF token', async () => {
    const keysBefore = await server.services.keys.list(tenant.tenantId);
    // Another origin on this machine (same site: the session cookie goes along, so only the console's own checks stop it).
    const evil: Server = createServer((_req, res) => {
      res.setHeader('content-type', 'text/html');
      res.end(`<!doctype html><title>prize</title><form id=f method=post action="${server.url}/console/keys">
        <input name=label value=evil><input name=scope value=readwrite></form><script>document.getElementById('f').submit()</script>`);
    });
    await new Promise<void>((r) => evil.listen(0, '127.0.0.1', r));
    try {
      await page.goto(`http://localhost:${(evil.address() as AddressInfo).port}/`);
      await page.waitForURL(`${server.url}/console/keys`);
      await page.locator('h1', { hasText: 'Request refused' }).waitFor();
    } finally {
      evil.close();
    }
    const cookie = (await context.cookies()).find((c) => c.name === 'avm_session')!;
    const noToken = await fetch(`${server.url}/console/keys`, {
      method: 'POST',
      headers: { cookie: `avm_session=${cookie.value}`, 'content-type': 'application/x-www-form-urlencoded', origin: server.url },
      body: 'label=evil2&scope=readwrite',
      redirect: 'manual',
    });
    assert.equal(noToken.status, 403);
    const keysAfter = await server.services.keys.list(tenant.tenantId);
    assert.equal(keysAfter.length, keysBefore.length, 'no key was issued');
  });

  test('lifecycle buttons; destroy asks for the id first', async () => {
    await page.goto(`${server.url}/console/vms/${vmId}`);
    await page.locator('#facts').getByRole('button', { name: 'Stop' }).click();
    await page.locator('.notice', { hasText: 'Stopping' }).waitFor();
    const [row] = await server.db.query<{ desired_state: string }>('SELECT desired_state FROM vms WHERE vm_id = $1', [vmId]);
    assert.equal(row.desired_state, 'stopped');
    await page.getByRole('link', { name: 'Destroy…' }).click();
    await axeCheck(page, 'destroy');
    await screenshots(page, 'destroy');
    await page.getByLabel("Type the VM's id to confirm").fill('vm_wrong');
    await page.getByRole('button', { name: 'Destroy VM' }).click();
    await page.locator('.problem', { hasText: 'does not match' }).waitFor();
    assert.equal((await server.db.query('SELECT 1 FROM vms WHERE vm_id = $1 AND deleted_at IS NULL', [vmId])).length, 1, 'nothing destroyed');
    await page.getByRole('link', { name: 'Destroy…' }).click();
    await page.getByLabel("Type the VM's id to confirm").fill(vmId);
    await page.getByRole('button', { name: 'Destroy VM' }).click();
    await page.locator('.notice', { hasText: 'destroyed' }).waitFor();
    assert.equal(await page.locator('#vm-rows tr', { hasText: vmId }).count(), 0);
  });

  test('keyboard only: sign-out is reachable by Tab and works; the old cookie is refused', async () => {
    const cookie = (await context.cookies()).find((c) => c.name === 'avm_session')!;
    await page.goto(`${server.url}/console/keys`);
    for (let i = 0; i < 12; i++) {
      await page.keyboard.press('Tab');
      if ((await page.evaluate(() => document.activeElement?.textContent?.trim())) === 'Sign out') break;
    }
    assert.equal(await page.evaluate(() => document.activeElement?.textContent?.trim()), 'Sign out');
    await page.keyboard.press('Enter');
    await page.waitForURL(/signed_out=1/);
    const res = await fetch(`${server.url}/console/vms`, { headers: { cookie: `avm_session=${cookie.value}` }, redirect: 'manual' });
    assert.equal(res.status, 303);
    assert.match(res.headers.get('location') ?? '', /\/console\/login/);
    assert.deepEqual(seen.dialogs, []);
    assert.deepEqual(seen.errors, [], 'no script errors and no Content-Security-Policy refusals');
  });
});

describe('web console sessions', () => {
  test('a session expires after 12 hours; signing out ends it at once; a wrong code is refused', async () => {
    const { db, drop } = await freshDb({ name: 'pglite' });
    try {
      const clock = new ManualClock();
      const mail: string[] = [];
      const services = buildServices(buildCoreServices(db, { clock }), { driver: async () => ({ usable: false, accel: null, qemu: null, detail: 'none' }) }, {
        mailer: { send: async (_to, _s, text) => void mail.push(text) },
      });
      const t = await services.tenants.create('sessions@example.com');
      await services.login.start('sessions@example.com');
      const code = /code is (\d{6})/.exec(mail.at(-1)!)![1];
      await assert.rejects(services.sessions.signIn('sessions@example.com', code === '000000' ? '111111' : '000000'), { code: 'unauthorized' });
      const { token, session } = await services.sessions.signIn('sessions@example.com', code);
      assert.equal(session.principal.tenantId, t.tenant_id);
      const [row] = await db.query<{ token_hash: string }>('SELECT token_hash FROM console_sessions');
      assert.notEqual(row.token_hash, token, 'only a hash is kept');
      assert.ok(await services.sessions.resolve(token));
      clock.t += SESSION_TTL_MS - 1000;
      assert.ok(await services.sessions.resolve(token));
      clock.t += 2000;
      assert.equal(await services.sessions.resolve(token), null, 'expired');
      await services.login.start('sessions@example.com');
      const second = await services.sessions.signIn('sessions@example.com', /code is (\d{6})/.exec(mail.at(-1)!)![1]);
      await services.sessions.signOut(second.session);
      assert.equal(await services.sessions.resolve(second.token), null, 'signed out');
      assert.equal(await services.sessions.resolve('x'.repeat(43)), null);
    } finally {
      await drop();
    }
  });
});

describe('web console over HTTP, without a browser', () => {
  test('cookies are Secure behind HTTPS; pages carry the CSP; a cross-site POST is refused before anything runs', async () => {
    const { db, drop } = await freshDb({ name: 'pglite' });
    const server = await startConsoleServer(db);
    try {
      const plain = await fetch(`${server.url}/console/login`);
      assert.doesNotMatch(plain.headers.get('set-cookie') ?? '', /Secure/);
      assert.match(plain.headers.get('content-security-policy') ?? '', /^default-src 'none'; script-src 'self'/);
      assert.equal(plain.headers.get('x-frame-options'), 'DENY');
      const proxied = await fetch(`${server.url}/console/login`, { headers: { 'x-forwarded-proto': 'https' } });
      assert.match(proxied.headers.get('set-cookie') ?? '', /; Secure/);
      assert.match(proxied.headers.get('set-cookie') ?? '', /HttpOnly; Secure; SameSite=Lax/);
      const { email } = await server.tenant();
      const attempts: Record<string, string>[] = [{ 'sec-fetch-site': 'cross-site' }, { origin: 'https://evil.example' }, { origin: 'null' }];
      for (const headers of attempts) {
        const res = await fetch(`${server.url}/console/login`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
          body: new URLSearchParams({ email }).toString(),
        });
        assert.equal(res.status, 403, JSON.stringify(headers));
      }
      assert.ok(!server.logs.some((l) => l.includes('login code')), 'no code was sent');
      const noToken = await fetch(`${server.url}/console/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: server.url },
        body: new URLSearchParams({ email }).toString(),
      });
      assert.equal(noToken.status, 403, 'the login form needs its double-submit token');
      const away = await fetch(`${server.url}/console/login?next=${encodeURIComponent('https://evil.example/')}`);
      assert.match(await away.text(), /name="next" value="\/console\/vms"/, 'next never leaves the console');
    } finally {
      await server.close();
      await drop();
    }
  });
});

describe('web console with a real VM', { skip: noBrowser || (imageDir ? false : 'set AGENTVM_TEST_IMAGE_DIR to a built image dir (npm run test:all does)') }, () => {
  let dataDir: string;
  let server: RunningServer;
  let browser: Browser;
  const logs: string[] = [];

  before(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-console-vm-'));
    const config = { ...loadConfig({ host: '127.0.0.1', port: 0, dataDir }), imageDir: imageDir! };
    await seedSnapshots(dataDir);
    server = await startServer(config, createLogger('info', new Writable({ write: (c, _e, cb) => (logs.push(c.toString()), cb()) })));
    await server.host.imageReady;
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    await server?.close({ stopVms: true });
    await killQemusUnder(dataDir);
    await rm(dataDir, { recursive: true, force: true });
  });

  test('a newcomer signs in, creates an echo VM, watches it reach running and runs a task whose output streams', async () => {
    const email = 'console-real@example.com';
    const t = await server.services.tenants.create(email);
    await server.services.billing.setCard(t.tenant_id, { brand: 'visa', last4: '4242' });
    const codeFromLog = (e: string) => /login code is (\d{6})/.exec(logs.filter((l) => l.includes(`"to":"${e}"`)).at(-1) ?? '')![1];
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const seen = await watch(page);
    await signIn(page, { url: server.url, codeFromLog }, email);
    await page.getByLabel('Agent harness').selectOption('echo');
    await page.getByRole('button', { name: 'Review and create' }).click();
    await page.getByRole('button', { name: 'Pay $19.00 and create' }).click();
    await page.waitForURL(/\/console\/vms\/vm_/);
    const vmId = /vms\/(vm_[A-Za-z0-9]+)/.exec(page.url())![1];
    await page.goto(`${server.url}/console/vms`);
    await page.locator('#vm-rows tr', { hasText: vmId }).locator('[data-status="running"]').waitFor({ timeout: 240_000 });
    await page.goto(`${server.url}/console/vms/${vmId}`);
    await page.getByLabel(/Task for/).fill(XSS_TASK);
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await page.waitForURL(/\/runs\/run_/);
    await page.locator('#run-output[data-finished]').waitFor({ timeout: 120_000 });
    assert.equal(await page.locator('#run-output').getAttribute('data-finished'), 'succeeded');
    const out = JSON.parse((await page.locator('#run-output').textContent())!.trim()) as { task: string; persist_runs: number };
    assert.equal(out.task, XSS_TASK);
    assert.equal(out.persist_runs, 1);
    await screenshots(page, 'run-real');
    // Secrets need a running VM: the value goes to it (or to the broker), never back to a page.
    await page.goto(`${server.url}/console/vms/${vmId}`);
    await page.getByLabel('Name', { exact: true }).fill('MY_TOKEN');
    await page.getByLabel('Value', { exact: true }).fill('console-secret-value-123');
    await page.getByRole('button', { name: 'Set secret' }).click();
    await page.locator('.notice', { hasText: 'Secret saved' }).waitFor();
    assert.equal(await page.locator('.secret-list code').textContent(), 'MY_TOKEN');
    assert.ok(!(await page.content()).includes('console-secret-value-123'), 'the value is never shown');
    await page.getByRole('button', { name: 'Remove secret MY_TOKEN' }).click();
    await page.locator('.notice', { hasText: 'Secret removed' }).waitFor();

    // Files: upload into a new folder (streamed by console.js), find it by navigating, download the same bytes.
    const payload = Buffer.from(Array.from({ length: 300_000 }, (_, i) => (i * 7919) % 251));
    await page.goto(`${server.url}/console/vms/${vmId}`);
    await page.locator('#file-rows, #files .empty').first().waitFor();
    await page.getByLabel('Upload a file to this folder').setInputFiles({ name: 'data.bin', mimeType: 'application/octet-stream', buffer: payload });
    await page.getByLabel('Save as (optional)').fill('data.bin');
    await page.getByRole('button', { name: 'Upload', exact: true }).click();
    await page.locator('.notice', { hasText: 'uploaded' }).waitFor({ timeout: 60_000 });
    const uploaded = await fetch(`${server.url}/v1/api/vms/${vmId}/files?path=data.bin`, { headers: { authorization: `Bearer ${t.api_key}` } });
    assert.equal(uploaded.status, 200);
    assert.ok(Buffer.from(await uploaded.arrayBuffer()).equals(payload), 'the bytes arrived whole');
    // Into a folder made by the API, then down into it from the listing.
    const put = await fetch(`${server.url}/v1/api/vms/${vmId}/files?path=${encodeURIComponent(`sub dir/${XSS_NAME.replace(/\//g, '_')}.txt`)}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${t.api_key}`, 'content-type': 'application/octet-stream' },
      body: 'hello from a folder\n',
    });
    assert.equal(put.status, 201);
    await page.goto(`${server.url}/console/vms/${vmId}`);
    assert.match(await page.locator('#file-rows').textContent() ?? '', /data\.bin/);
    await page.locator('#file-rows').getByRole('link', { name: 'sub dir/' }).click();
    await page.waitForURL(/dir=sub%20dir/);
    const fileLink = page.locator('#file-rows').getByRole('link', { name: `${XSS_NAME.replace(/\//g, '_')}.txt` });
    await fileLink.waitFor();
    assert.equal(await page.locator('#file-rows img').count(), 0, 'a file name with markup is text');
    const [download] = await Promise.all([page.waitForEvent('download'), fileLink.click()]);
    const saved = await download.path();
    assert.equal(readFileSync(saved!, 'utf8'), 'hello from a folder\n');
    await axeCheck(page, 'VM files');
    await screenshots(page, 'vm-files');
    await page.locator('#files').getByRole('link', { name: '/persist/workspace' }).click();
    await page.locator('#file-rows').getByRole('link', { name: 'data.bin' }).waitFor();

    // Ports: an app in the VM is listed with its link; Open sends a new tab to the preview with a new
    // token, which the server trades for a cookie of that host (Chromium resolves *.localhost itself).
    const APP = "require('http').createServer((q, s) => s.end('<h1>console preview ' + q.url + '</h1>')).listen(8080);";
    const started = await server.host.driver!.exec(vmId, { argv: ['sh', '-c', `cat > /tmp/app.js <<'APP_EOF'\n${APP}\nAPP_EOF\n${detached('node /tmp/app.js >/tmp/app.log 2>&1')}`] }, 60_000);
    assert.equal(started.exit_code, 0, started.stderr);
    await until('the app listening', async () => {
      const r = await fetch(`${server.url}/v1/api/vms/${vmId}/ports`, { headers: { authorization: `Bearer ${t.api_key}` } });
      return r.status === 200 && ((await r.json()) as { data: { port: number }[] }).data.some((p) => p.port === 8080);
    }, 240_000);
    await page.goto(`${server.url}/console/vms/${vmId}`);
    const portRow = page.locator('#ports tr', { hasText: '8080' });
    assert.match((await portRow.textContent()) ?? '', new RegExp(`http://8080-${vmId.toLowerCase().replace(/_/g, '-')}\\.localhost:${server.port}/`));
    await axeCheck(page, 'VM ports');
    const [tab] = await Promise.all([page.context().waitForEvent('page'), portRow.getByRole('button', { name: 'Open' }).click()]);
    await tab.locator('h1', { hasText: 'console preview /' }).waitFor({ timeout: 60_000 });
    assert.doesNotMatch(tab.url(), /agentvm_token/, 'the token is traded for a cookie and leaves the address');
    await tab.reload();
    await tab.locator('h1', { hasText: 'console preview /' }).waitFor({ timeout: 30_000 });
    await tab.close();
    const previewHost = `8080-${vmId.toLowerCase().replace(/_/g, '-')}.localhost:${server.port}`;
    const bare = await new Promise<number>((resolve, reject) =>
      httpGet({ host: '127.0.0.1', port: server.port, path: '/', headers: { host: previewHost } }, (res) => (res.resume(), resolve(res.statusCode!))).on('error', reject),
    );
    assert.equal(bare, 401, 'private without the cookie');
    await portRow.getByRole('button', { name: 'Make public' }).click();
    await page.locator('#ports tr', { hasText: '8080' }).getByRole('button', { name: 'Make private' }).waitFor();
    assert.equal(await page.locator('#ports tr', { hasText: '8080' }).getByRole('link', { name: /8080-/ }).getAttribute('href'), `http://${previewHost}/`);

    // Branches and snapshots: a snapshot named with markup shows as text; a branch lands on the new
    // VM's page (charged like a create); the snapshot deleted leaves the list.
    await page.goto(`${server.url}/console/vms/${vmId}`);
    await page.getByLabel('Snapshot name').fill(XSS_NAME);
    await page.getByRole('button', { name: 'Take a snapshot' }).click();
    await page.locator('.notice', { hasText: 'Snapshot taken' }).waitFor({ timeout: 120_000 });
    const snapRow = page.locator('#snapshots tbody tr', { hasText: /snap_/ });
    assert.equal(await snapRow.count(), 1);
    assert.equal(await page.locator('#snapshots img').count(), 0, 'a snapshot name with markup is text');
    await axeCheck(page, 'VM snapshots');
    assert.match((await page.locator('#snapshots').textContent()) ?? '', /each, charged to your card now|¢ per hour from credits/, "a branch's price is said before it is charged");
    await page.getByLabel('New VMs').fill('1');
    await page.getByRole('button', { name: 'Branch', exact: true }).click();
    await page.locator('.notice', { hasText: 'Branched' }).waitFor({ timeout: 120_000 });
    const branchId = /vms\/(vm_[A-Za-z0-9]+)/.exec(page.url())![1];
    assert.notEqual(branchId, vmId);
    const vmOf = async (id: string) => (await fetch(`${server.url}/v1/api/vms/${id}`, { headers: { authorization: `Bearer ${t.api_key}` } })).json();
    const [branch, parent] = [await vmOf(branchId), await vmOf(vmId)];
    assert.deepEqual([branch.plan, branch.tier], [parent.plan, parent.tier], 'a branch keeps the pricing of the VM it came from');
    // Every snapshot on a page of its own (a snapshot outlives its VM): a VM started from one with the pricing picked there.
    await page.goto(`${server.url}/console/snapshots`);
    await fetch(`${server.url}/v1/api/vms/${branchId}`, { method: 'DELETE', headers: { authorization: `Bearer ${t.api_key}` } });
    const listed = page.locator('tbody tr', { hasText: /snap_/ });
    assert.equal(await listed.count(), 1);
    assert.match((await listed.textContent()) ?? '', new RegExp(vmId));
    await axeCheck(page, 'Snapshots');
    await listed.getByLabel('Pricing').selectOption('plan:starter');
    await listed.getByRole('button', { name: /^Start a VM from it/ }).click();
    await page.locator('.notice', { hasText: 'starting from the snapshot' }).waitFor({ timeout: 120_000 });
    const fromSnap = /vms\/(vm_[A-Za-z0-9]+)/.exec(page.url())![1];
    assert.notEqual(fromSnap, vmId);
    assert.equal((await vmOf(fromSnap)).plan, 'starter');
    for (let i = 0; (await vmOf(fromSnap)).status !== 'running'; i++) {
      assert.ok(i < 1200, 'the VM from the snapshot runs');
      await page.waitForTimeout(100);
    }
    // A VM destroyed while its page is open: the page's overview says so and stops asking.
    await fetch(`${server.url}/v1/api/vms/${fromSnap}`, { method: 'DELETE', headers: { authorization: `Bearer ${t.api_key}` } });
    await page.locator('#facts', { hasText: 'This VM no longer exists' }).waitFor({ timeout: 30_000 });
    await page.goto(`${server.url}/console/vms/${vmId}`);
    await page.locator('#snapshots').getByRole('button', { name: /^Delete the snapshot/ }).click();
    await page.locator('.notice', { hasText: 'The snapshot was deleted' }).waitFor();
    await page.locator('#snapshots .empty').waitFor();

    // The terminal: "Open terminal" gets a ticket from the shell operation, the page joins xterm.js to the socket.
    const rows = () => page.evaluate(() => [...document.querySelectorAll('#terminal-screen .xterm-rows > div')].map((r) => (r.textContent ?? '').replace(/\u00a0/g, ' ').trimEnd()));
    const lineAppears = async (line: string | RegExp, timeout = 30_000) => {
      const deadline = Date.now() + timeout;
      for (;;) {
        const now = await rows();
        if (now.some((l) => (typeof line === 'string' ? l === line : line.test(l)))) return now;
        if (Date.now() > deadline) assert.fail(`no line ${line} in the terminal:\n${now.filter(Boolean).join('\n')}`);
        await page.waitForTimeout(100);
      }
    };
    const type = async (text: string) => {
      await page.keyboard.type(text);
      await page.keyboard.press('Enter');
    };
    await page.goto(`${server.url}/console/vms/${vmId}`);
    await page.locator('#terminal').getByRole('button', { name: 'Open terminal' }).click();
    await page.waitForURL(/\/terminal$/);
    await page.locator('#terminal-status[data-state="connected"]').waitFor({ timeout: 30_000 });
    assert.equal(await page.evaluate(() => document.activeElement?.classList.contains('xterm-helper-textarea')), true, 'the keyboard is in the terminal');
    await type('echo $((6*7))');
    await lineAppears('42');
    // 24-bit colour (a style attribute in xterm's renderer) under the CSP: set through the CSSOM, it applies.
    await type(`printf '\\033[38;2;255;0;0mRED\\033[0m\\n'`);
    await lineAppears('RED');
    assert.equal(await page.locator('#terminal-screen .xterm-rows span', { hasText: /^RED$/ }).first().evaluate((el) => getComputedStyle(el).color), 'rgb(255, 0, 0)');
    // The shell follows the window: narrow, the terminal fits 375 px and the shell is told the new size.
    const size1280 = await page.locator('#terminal-size').textContent();
    await page.setViewportSize({ width: 375, height: 812 });
    await page.waitForFunction((before) => document.getElementById('terminal-size')?.textContent !== before, size1280);
    const [cols, rows375] = (await page.locator('#terminal-size').textContent())!.split(' × ').map(Number);
    assert.ok(cols < 50, `${cols} columns at 375 px`);
    // The guest sets a terminal's size a moment after the frame (a process of its own, slow in an emulated VM).
    for (let tries = 0; ; tries++) {
      await type('stty size');
      try {
        await lineAppears(`${rows375} ${cols}`, 3000);
        break;
      } catch (err) {
        if (tries === 10) throw err;
      }
    }
    assert.ok((await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)) <= 1, 'the terminal fits the width');
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.waitForFunction((before) => document.getElementById('terminal-size')?.textContent === before, size1280);
    await axeCheck(page, 'terminal');
    await screenshots(page, 'terminal');
    // Keyboard only: Tab is the shell's; Esc then Tab leaves; Disconnect, then Reconnect (a fresh ticket).
    await page.keyboard.press('Escape');
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'terminal-screen-reader', 'Esc then Tab moved on to the next control');
    // Screen reader mode: xterm.js's own accessible copy of the screen, which passes axe-core too.
    await page.keyboard.press('Space');
    await page.locator('#terminal-screen .xterm-accessibility-tree').waitFor({ state: 'attached' });
    assert.match(await page.locator('#terminal-screen .xterm-accessibility-tree').textContent() ?? '', /42/);
    await axeCheck(page, 'terminal, screen reader mode');
    await page.keyboard.press('Space');
    await page.getByRole('button', { name: 'Disconnect' }).click();
    await page.locator('#terminal-status[data-state="closed"]', { hasText: 'You disconnected.' }).waitFor();
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'terminal-reconnect');
    await page.keyboard.press('Enter');
    await page.locator('#terminal-status[data-state="connected"]').waitFor({ timeout: 30_000 });
    await type('exit 3');
    await page.locator('#terminal-status[data-state="closed"]', { hasText: 'The shell ended (exit 3).' }).waitFor({ timeout: 30_000 });
    // A reload asks for a new ticket (the first one was used once) and connects again.
    await page.reload();
    await page.locator('#terminal-status[data-state="connected"]').waitFor({ timeout: 30_000 });
    await type('echo again-$((1+1))');
    await lineAppears('again-2');
    // The VM stops under the shell: the socket closes with 4409 and the page says so.
    const stop = await fetch(`${server.url}/v1/api/vms/${vmId}/stop`, { method: 'POST', headers: { authorization: `Bearer ${t.api_key}` } });
    assert.ok(stop.status < 300, `stop: ${stop.status}`);
    await page.locator('#terminal-status[data-state="closed"]', { hasText: 'The VM stopped' }).waitFor({ timeout: 120_000 });
    assert.equal(await page.getByRole('button', { name: 'Reconnect' }).isVisible(), true);
    assert.deepEqual(seen.dialogs, []);
    assert.deepEqual(seen.errors, [], 'no script errors and no Content-Security-Policy refusals');
  });
});
