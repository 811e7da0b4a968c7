/**
 * A coding task end to end, as a newcomer's agent does it in a workstation VM: claude-code (its model
 * a stand-in that scripts its Bash tool calls) clones a repository over HTTP, installs a Debian package
 * with `sudo apt-get` and an npm package with `npm install`, fixes the failing test, runs the tests
 * with `python3 -m unittest` and `npm test`, and commits; the repository read back with the files API
 * has the commit. Then an image built from a Dockerfile whose RUN installs the same Debian package (its
 * log followed live, line by line), and a VM of it where the tests pass with no install.
 *
 * Every host is a stand-in on loopback pinned by the name the presets allow (deb.debian.org and
 * security.debian.org for @debian, registry.npmjs.org for @npm, github.com for @github): this file
 * runs itself again inside a network namespace of its own (test/netns.ts). The stand-in archive
 * cannot be signed with Debian's key, so its key is put where Debian's is (as an installation with
 * an archive of its own does). Needs QEMU and a built guest image (AGENTVM_TEST_IMAGE_DIR).
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { createParser } from 'eventsource-parser';
import type { RunningServer } from '../src/server.ts';
import { HARNESS_HOME, HARNESS_USER, WORKSPACE } from '../src/wire/protocol.ts';
import { until, type ApiCall } from './helpers.ts';
import { startVmTestServer, type VmTestServer } from './vmServer.ts';
import { inOwnNetns, netnsUnavailable, inOwnNetnsRun } from './netns.ts';
import { startProviderStandins, type ProviderStandins } from './standins/providers.ts';
import { startRegistryStandins, type RegistryStandins } from './standins/registries.ts';

const imageDir = process.env.AGENTVM_TEST_IMAGE_DIR;
const skip = imageDir ? netnsUnavailable() ?? false : 'set AGENTVM_TEST_IMAGE_DIR to a built image dir (npm run test:all does)';

/** The team's repository: a Python module whose test fails, a Node module, each needing a package. */
const REPO = {
  repo: 'team/app',
  message: 'Page names from titles',
  files: {
    'pages.py': "from standin_slug import slug\n\n\ndef page_name(title):\n    return slug(title) + '.htm'\n",
    'test_pages.py':
      "import unittest\n\nfrom pages import page_name\n\n\nclass PageNames(unittest.TestCase):\n    def test_html(self):\n        self.assertEqual(page_name('Hello World'), 'hello-world.html')\n\n\nif __name__ == '__main__':\n    unittest.main()\n",
    'index.js': "const pad = require('standin-leftpad');\nmodule.exports = (n) => pad(String(n), 5, '0');\n",
    'test.js': "const assert = require('node:assert');\nassert.strictEqual(require('./index.js')(42), '00042');\nconsole.log('node test passed');\n",
    'package.json': JSON.stringify({ name: 'app', version: '1.0.0', private: true, scripts: { test: 'node test.js' }, dependencies: { 'standin-leftpad': '^1.0.0' } }, null, 2),
    // The stand-in registry speaks plain HTTP, under the @npm preset's host.
    '.npmrc': 'registry=http://registry.npmjs.org/\naudit=false\nfund=false\nupdate-notifier=false\n',
    '.gitignore': 'node_modules/\n__pycache__/\n',
  },
};
const DEB = {
  name: 'python3-standin-slug',
  version: '1.0-1',
  description: 'Slugs from titles (a stand-in package)',
  files: { 'usr/lib/python3/dist-packages/standin_slug.py': "def slug(text):\n    return '-'.join(text.lower().split())\n" },
};
const NPM = { name: 'standin-leftpad', version: '1.0.0', files: { 'index.js': 'module.exports = (s, n, c) => s.padStart(n, c);\n' } };

const APP = `${WORKSPACE}/app`;
const RESULTS = `${WORKSPACE}/test-results.txt`;
/** The agent's tool calls, one after another. */
const TASK = [
  `cd ${WORKSPACE} && git clone http://github.com/team/app.git && cd app && git log --oneline`,
  `sudo apt-get update && sudo apt-get install -y ${DEB.name}`,
  `cd ${APP} && npm install`,
  `cd ${APP} && { python3 -m unittest 2>&1 | tail -1; sed -i "s/'.htm'/'.html'/" pages.py && python3 -m unittest && npm test && echo ALL TESTS PASS; } > ${RESULTS} 2>&1; cat ${RESULTS}`,
  `cd ${APP} && git add pages.py && git -c user.name=Agent -c user.email=agent@example.com commit -m 'Page names end in .html' && git log --oneline`,
];

if (!inOwnNetns()) {
  test('a coding task end to end in real VMs, inside a network namespace of its own', { skip, timeout: 40 * 60_000 }, inOwnNetnsRun(import.meta.url, 39));
} else {
  describe('a workstation VM does a coding task with packages from Debian and npm', () => {
    let t: VmTestServer;
    let server: RunningServer;
    let api: ApiCall;
    let key: string;
    let providers: ProviderStandins;
    let registries: RegistryStandins;
    const ANTHROPIC_KEY = 'sk-ant-api03-codingtask-5a4b3c2d1e';

    before(async () => {
      providers = await startProviderStandins({ keys: { anthropic: ANTHROPIC_KEY }, commands: TASK, finalText: 'The tests pass and the fix is committed.' });
      process.env.AGENTVM_PROVIDER_ANTHROPIC_URL = providers.anthropic.url.replace('127.0.0.1', 'anthropic.test');
      process.env.AGENTVM_EGRESS_HOSTS = ['anthropic.test', 'deb.debian.org', 'security.debian.org', 'registry.npmjs.org', 'github.com'].map((h) => `${h}=127.0.0.1`).join(',');
      t = await startVmTestServer('coding', { email: 'coding@example.com', prewarmed: true });
      ({ server, api } = t);
      key = t.tenant.api_key;
      registries = await startRegistryStandins(path.join(t.dataDir, 'registries'), { deb: DEB, npm: NPM, git: REPO });
    });

    after(async () => {
      await registries?.close();
      await t?.close();
      await providers?.close();
    });

    /** The VM once running; a VM that failed ends the test at once rather than at the wait's end. */
    const running = async (vmId: string) => {
      // The first VM of the server boots cold and makes the golden snapshot: minutes on a busy machine.
      const deadline = Date.now() + 15 * 60_000;
      for (;;) {
        const vm = (await api('GET', `/v1/api/vms/${vmId}`)).body;
        if (vm.status === 'running') return vm;
        if (vm.status === 'failed') throw new Error(`${vmId} failed: ${vm.status_reason}`);
        if (Date.now() > deadline) throw new Error(`${vmId} is still ${vm.status}`);
        await new Promise((r) => setTimeout(r, 250));
      }
    };
    /**
     * A VM of `body`, running. One more try when its QEMU was too slow to start (a machine under heavy
     * load, seen as the driver's start-up timeouts), said on stderr: that is the host's state, not this task's.
     */
    const createRunning = async (body: object) => {
      for (let attempt = 1; ; attempt++) {
        const created = await api('POST', '/v1/api/vms', body);
        assert.equal(created.status, 201, JSON.stringify(created.body));
        try {
          return await running(created.body.vm_id);
        } catch (err) {
          if (attempt > 1 || !/did not open its control socket in time|the guest agent did not answer within/.test((err as Error).message)) throw err;
          process.stderr.write(`coding task: ${(err as Error).message}; one more VM\n`);
          await api('DELETE', `/v1/api/vms/${created.body.vm_id}`);
        }
      }
    };
    /** A file of the VM's persist disk, through the files API. */
    const readFile = async (vmId: string, p: string) => {
      const res = await fetch(`${server.url}/v1/api/vms/${vmId}/files?path=${encodeURIComponent(p)}`, { headers: { authorization: `Bearer ${key}` } });
      assert.equal(res.status, 200, `${p}: ${res.status}`);
      return res.text();
    };
    /** A shell line as the user agent, with a run's environment (the gateway as its proxy). */
    const asAgent = (vmId: string, script: string) =>
      server.host.driver!.exec(
        vmId,
        {
          argv: ['bash', '-c', script],
          uid: HARNESS_USER.uid,
          gid: HARNESS_USER.gid,
          cwd: WORKSPACE,
          env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: HARNESS_HOME, LANG: 'C.UTF-8', http_proxy: 'http://gateway.agentvm.internal:3128' },
          timeout_ms: 300_000,
        },
        360_000,
      );

    test('claude-code clones, installs from Debian and npm, fixes the test, runs the tests and commits', { timeout: 25 * 60_000 }, async () => {
      const vm = await createRunning({ harness: 'claude-code', egress: { mode: 'allowlist', allow: ['api.anthropic.com', '@debian', '@npm', '@github'] } });
      assert.equal((await api('PUT', `/v1/api/vms/${vm.vm_id}/secrets`, { ANTHROPIC_API_KEY: ANTHROPIC_KEY })).status, 200);
      // The stand-in archive's key where Debian's is (see the top of this file).
      const keyring = await server.host.driver!.exec(
        vm.vm_id,
        { argv: ['sh', '-c', 'base64 -d > /usr/share/keyrings/debian-archive-keyring.gpg'], stdin: registries.debianKeyring.toString('base64') },
        60_000,
      );
      assert.equal(keyring.exit_code, 0, keyring.stderr);

      const queued = await api('POST', `/v1/api/vms/${vm.vm_id}/run`, { task: 'Make the tests pass and commit the fix.' }, { prefer: 'respond-async' });
      assert.equal(queued.status, 202, JSON.stringify(queued.body));
      const run = await until(
        'the task ends',
        async () => {
          const r = await api('GET', `/v1/api/vms/${vm.vm_id}/runs/${queued.body.run_id}`);
          return r.body.finished_at ? r.body : undefined;
        },
        20 * 60_000,
      );
      const calls = providers.seen.filter((r) => r.provider === 'anthropic' && r.path === '/v1/messages').length;
      const story = `run: exit ${run.exit_code}, ${calls} model calls\n${(run.stdout ?? '').slice(-1500)}\n${(run.stderr ?? '').slice(-1500)}\nhosts: ${[...new Set(registries.seen)].slice(-30).join(', ')}`;
      assert.equal(run.exit_code, 0, story);
      assert.match(run.stdout, /The tests pass and the fix is committed\./, story);

      // Read back with the files API: the tests failed, then passed; the commit is there.
      const results = await readFile(vm.vm_id, RESULTS);
      assert.match(results, /^FAILED \(failures=1\)$/m, `${results}\n${story}`);
      assert.match(results, /^Ran 1 test/m, results);
      assert.match(results, /node test passed\nALL TESTS PASS/, results);
      assert.match(await readFile(vm.vm_id, 'app/pages.py'), /'\.html'/);
      const head = await readFile(vm.vm_id, 'app/.git/logs/HEAD');
      assert.match(head, /clone: from http:\/\/github\.com\/team\/app\.git/, head);
      assert.match(head, /Agent <agent@example\.com> \d+ [+-]\d{4}\tcommit: Page names end in \.html/, head);
      assert.equal(JSON.parse(await readFile(vm.vm_id, 'app/node_modules/standin-leftpad/package.json')).version, NPM.version);

      // Each came from its stand-in, through the gateway, allowed by its preset.
      for (const want of ['github.com /team/app.git/info/refs', `deb.debian.org /debian/pool/main/${DEB.name}_${DEB.version}_all.deb`, `registry.npmjs.org /${NPM.name}/-/${NPM.name}-${NPM.version}.tgz`]) {
        assert.ok(registries.seen.includes(want), `${want} was asked for: ${registries.seen.join(', ')}`);
      }
      const log = (await api('GET', `/v1/api/vms/${vm.vm_id}/egress/log?limit=200`)).body.data as Array<{ host: string; decision: string; reason: string }>;
      const reasons = new Set(log.filter((e) => e.decision === 'allowed').map((e) => e.reason));
      for (const r of ['allowlist @github (github.com)', 'allowlist @debian (deb.debian.org)', 'allowlist @debian (security.debian.org)', 'allowlist @npm (registry.npmjs.org)']) {
        assert.ok(reasons.has(r), `${r} in the egress log: ${[...reasons].join(', ')}`);
      }
      process.stderr.write(`coding task: ${Math.round(run.duration_ms ?? 0) / 1000} s, ${calls} model calls\n`);
      assert.equal((await api('DELETE', `/v1/api/vms/${vm.vm_id}`)).status, 200);
    });

    test('an image whose RUN installs the package, its log live line by line; its VM runs the tests with no install', { timeout: 20 * 60_000 }, async () => {
      const dockerfile = [
        'FROM base',
        'COPY standin-archive-keyring.gpg /usr/share/keyrings/debian-archive-keyring.gpg',
        // Goes on only once the test has seen its first line in the build's stream, before the step ended.
        'RUN echo "waiting for the go" && until curl -fsS http://github.com/go; do sleep 0.2; done',
        `RUN apt-get update && apt-get install -y --no-install-recommends ${DEB.name} && rm -rf /var/lib/apt/lists/*`,
      ].join('\n');
      const created = await api('POST', '/v1/api/images', { name: 'team app', dockerfile, files: { 'standin-archive-keyring.gpg': registries.debianKeyring.toString('base64') } });
      assert.equal(created.status, 202, JSON.stringify(created.body));
      const lines: string[] = [];
      let image: any = null;
      const res = await fetch(`${server.url}/v1/api/images/${created.body.image_id}/build/events`, { headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' } });
      assert.equal(res.status, 200);
      const parser = createParser({
        onEvent: (e) => {
          if (e.event === 'end') image = JSON.parse(e.data);
          if (e.event !== 'log') return;
          const text = JSON.parse(e.data).text as string;
          lines.push(text);
          if (text === 'waiting for the go') registries.answers.set('/go', 'go\n');
        },
      });
      const decoder = new TextDecoder();
      for await (const chunk of res.body!) parser.feed(decoder.decode(chunk as Uint8Array, { stream: true }));
      const story = lines.join('\n');
      assert.equal(image?.status, 'ready', story);
      assert.ok(lines.indexOf('waiting for the go') < lines.indexOf('go'), story);
      assert.ok(lines.some((l) => new RegExp(`^Setting up ${DEB.name} \\(${DEB.version}\\)`).test(l)), story);
      assert.ok(lines.some((l) => /^Get:\d+ http:\/\/deb\.debian\.org\/debian trixie InRelease/.test(l)), story);
      assert.ok(image.packages.some((p: { name: string; version: string }) => p.name === DEB.name && p.version === DEB.version), 'the package is in the image\'s manifest');

      const vm = await createRunning({ harness: 'echo', image: 'team-app', egress: { mode: 'allowlist', allow: ['@github'] } });
      const r = await asAgent(vm.vm_id, `git clone -q http://github.com/team/app.git && cd app && sed -i "s/'.htm'/'.html'/" pages.py && python3 -m unittest 2>&1`);
      assert.equal(r.exit_code, 0, `${r.stdout}${r.stderr}`);
      assert.match(r.stdout, /^OK$/m);
      assert.equal((await api('DELETE', `/v1/api/vms/${vm.vm_id}`)).status, 200);
    });
  });
}
