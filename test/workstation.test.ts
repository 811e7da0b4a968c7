/**
 * The base image is a coding workstation (decisions §15): its manifest at GET /v1/api/images/base, read
 * from the image a VM host runs; and in a real microVM, as the user agent, the toolchain works (git, a
 * Python venv, a C program compiled and run, curl, jq, npm) and `sudo` needs no password. The real-VM
 * part needs QEMU and a built guest image (AGENTVM_TEST_IMAGE_DIR); its VM's egress is `none`.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { loadConfig } from '../src/config.ts';
import { startServer, type RunningServer } from '../src/server.ts';
import { createLogger } from '../src/log.ts';
import { loadImage, type Image, type ImageManifest } from '../src/image/build.ts';
import { hostsBaseImage, trackBaseImage } from '../src/image/manifest.ts';
import { parseDpkgQuery } from '../src/image/workstation.ts';
import { HARNESS_HOME, HARNESS_USER, WORKSPACE } from '../src/wire/protocol.ts';
import type { ExecResult } from '../src/wire/protocol.ts';
import { backends, createTestApp, killQemusUnder, seedSnapshots, until, type TestApp } from './helpers.ts';

const imageDir = process.env.AGENTVM_TEST_IMAGE_DIR;

/** An image dir holding one image's manifest as the build writes it (the other files are not read here). */
async function imageWithManifest(dir: string, id: string, packages: { name: string; version: string }[]): Promise<ImageManifest> {
  const manifest: ImageManifest = {
    id,
    kernel_package: 'linux-image-6.1.0-56-cloud-amd64',
    kernel_version: '6.1.192-2',
    kernel_release: '6.1.0-56-cloud-amd64',
    suite: 'trixie',
    packages,
    built_at: '2026-11-26T09:00:00.000Z',
    rootfs_bytes: 4 * 1024 ** 3,
    size_bytes: 1_849_339_904,
    build_ms: 150_000,
    harnesses: {},
    unavailable: {},
  };
  await mkdir(path.join(dir, id), { recursive: true });
  await writeFile(path.join(dir, id, 'manifest.json'), JSON.stringify(manifest));
  return manifest;
}

test('the manifest keeps the installed packages of dpkg-query, sorted by name', () => {
  const out = 'installed zlib1g 1:1.3.dfsg+really1.3.1-1+b1\nconfig-files oldpkg 1.0\ninstalled git 1:2.47.3-0+deb13u1\nnot-installed gone 2\n\n';
  assert.deepEqual(parseDpkgQuery(out), [
    { name: 'git', version: '1:2.47.3-0+deb13u1' },
    { name: 'zlib1g', version: '1:1.3.dfsg+really1.3.1-1+b1' },
  ]);
});

for (const backend of backends()) {
  describe(`GET /v1/api/images/base on ${backend.name}`, () => {
    let dir: string;
    const apps: TestApp[] = [];
    const packages = [
      { name: 'git', version: '1:2.47.3-0+deb13u1' },
      { name: 'npm', version: '10.9.9' },
      { name: 'python3', version: '3.13.5-1' },
    ];
    before(async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-images-'));
    });
    after(async () => {
      for (const app of apps) await app.close();
      await rm(dir, { recursive: true, force: true });
    });
    const appWith = async (opts: Parameters<typeof createTestApp>[1]) => {
      const app = await createTestApp(backend, opts);
      apps.push(app);
      return app;
    };

    test('a ready image: the Image shape with the packages and size of its manifest, for a read-only key too', async () => {
      const manifest = await imageWithManifest(dir, 'aaaa1111bbbb2222cccc', packages);
      const t = await appWith({ baseImage: trackBaseImage(loadImage(dir, 'aaaa1111bbbb2222cccc').then((i) => i!)) });
      const { key } = await t.tenant();
      const read = (await t.request('POST', '/v1/api/keys', { key, body: { scope: 'read' } })).body.key;
      const res = await t.request('GET', '/v1/api/images/base', { key: read });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body, {
        image_id: 'base',
        slug: 'base',
        name: 'base',
        visibility: 'public',
        status: 'ready',
        status_reason: null,
        parent: null,
        size_bytes: manifest.size_bytes,
        packages,
        created_at: '2026-11-26T08:57:30.000Z',
        ready_at: manifest.built_at,
      });
      assert.equal((await t.request('GET', '/v1/api/images/base')).status, 401);
    });

    test('an image being built answers building, one that failed says why, and no VM host is a 503', async () => {
      let fail!: (err: Error) => void;
      const failing = new Promise<Image>((_resolve, reject) => (fail = reject));
      const t = await appWith({ baseImage: trackBaseImage(failing) });
      const { key } = await t.tenant();
      const building = await t.request('GET', '/v1/api/images/base', { key });
      assert.equal(building.status, 200, building.text);
      assert.equal(building.body.status, 'building');
      assert.deepEqual([building.body.packages, building.body.size_bytes, building.body.ready_at, building.body.status_reason], [[], null, null, null]);
      fail(new Error('debootstrap failed (1): E: Couldn\'t download packages'));
      await until('the failure', async () => (await t.request('GET', '/v1/api/images/base', { key })).body.status === 'failed');
      const failed = await t.request('GET', '/v1/api/images/base', { key });
      assert.equal(failed.body.status_reason, 'debootstrap failed (1): E: Couldn\'t download packages');
      assert.equal(failed.body.created_at, building.body.created_at);

      const none = await appWith({});
      const res = await none.request('GET', '/v1/api/images/base', { key: (await none.tenant()).key });
      assert.equal(res.status, 503, res.text);
      assert.equal(res.body.error, 'unavailable');
    });

    test("an API replica reads the image the live hosts report from its image dir, or says it cannot", async () => {
      await imageWithManifest(dir, 'dddd4444eeee5555ffff', packages.slice(0, 1));
      let t!: TestApp;
      t = await appWith({ baseImage: hostsBaseImage(dir, () => t.services.hosts.liveImageIds()) });
      const { key } = await t.tenant();
      const noHost = await t.request('GET', '/v1/api/images/base', { key });
      assert.equal(noHost.status, 503, noHost.text);
      const host = { name: 'h', accel: 'tcg', vcpus_total: 2, memory_mib_total: 4096, disk_gib_total: 40, internal_url: null };
      await t.services.hosts.register({ ...host, host_id: 'host_a', image_id: 'dddd4444eeee5555ffff' });
      const res = await t.request('GET', '/v1/api/images/base', { key });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual([res.body.status, res.body.packages], ['ready', packages.slice(0, 1)]);
      // A host with an image this server has no files of, heartbeating last.
      await t.services.hosts.register({ ...host, host_id: 'host_b', image_id: '9999888877776666dddd' });
      await t.services.hosts.heartbeat('host_b', '9999888877776666dddd');
      assert.equal((await t.request('GET', '/v1/api/images/base', { key })).body.status, 'ready', 'another live host runs an image it can read');
      await t.db.query("UPDATE hosts SET heartbeat_at = now() - interval '1 hour' WHERE host_id = 'host_a'");
      const unknown = await t.request('GET', '/v1/api/images/base', { key });
      assert.equal(unknown.status, 503, unknown.text);
      assert.match(unknown.body.message, /9999888877776666dddd/);
    });
  });
}

describe('a workstation in a real microVM', { skip: imageDir ? false : 'set AGENTVM_TEST_IMAGE_DIR to a built image dir (npm run test:all does)' }, () => {
  let dataDir: string;
  let server: RunningServer;
  let api: (method: string, p: string, body?: unknown) => Promise<{ status: number; body: any; text: string }>;
  let vmId: string;

  before(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-workstation-'));
    process.env.AGENTVM_ADMIN_TOKEN = 'avm_admin_test_token_0123456789abcdefghijkl';
    const config = { ...loadConfig({ host: '127.0.0.1', port: 0, dataDir }), imageDir: imageDir! };
    delete process.env.AGENTVM_ADMIN_TOKEN;
    await seedSnapshots(dataDir);
    const sink = new Writable({
      write: (c, _e, cb) => {
        if (/"level":(50|60)/.test(c.toString())) process.stderr.write(c);
        cb();
      },
    });
    server = await startServer(config, createLogger('info', sink));
    await server.host.imageReady;
    const call = (key: string) => async (method: string, p: string, body?: unknown) => {
      const res = await fetch(`${server.url}${p}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined, text };
    };
    const admin = call(config.adminToken!);
    const tenant = await admin('POST', '/v1/admin/tenants', { email: 'workstation@example.com' });
    await admin('PUT', `/v1/admin/tenants/${tenant.body.tenant_id}/card`, { brand: 'visa', last4: '4242' });
    api = call(tenant.body.api_key);
    // A clone of the golden VM of this image, as a customer's VM starts.
    await server.host.prewarmed;
    const created = await api('POST', '/v1/api/vms', { harness: 'opencode', egress: { mode: 'none', allow: [] } });
    assert.equal(created.status, 201, created.text);
    vmId = created.body.vm_id;
    await until(`${vmId} running`, async () => {
      const vm = (await api('GET', `/v1/api/vms/${vmId}`)).body;
      if (vm.status === 'failed') throw new Error(`failed: ${vm.status_reason}`);
      return vm.status === 'running';
    });
  });

  after(async () => {
    await server?.close({ stopVms: true });
    if (dataDir) {
      await killQemusUnder(dataDir);
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  /** A shell command as the user agent in the workspace, with a run's plain environment. */
  const asAgent = (script: string): Promise<ExecResult> =>
    server.host.driver!.exec(vmId, {
      argv: ['bash', '-c', script],
      uid: HARNESS_USER.uid,
      gid: HARNESS_USER.gid,
      cwd: WORKSPACE,
      env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: HARNESS_HOME, USER: HARNESS_USER.name, LANG: 'C.UTF-8' },
      timeout_ms: 240_000,
    }, 300_000);
  const ok = async (script: string): Promise<string> => {
    const r = await asAgent(script);
    assert.equal(r.exit_code, 0, `${script}: exit ${r.exit_code}: ${r.stdout}${r.stderr}`);
    return r.stdout.trim();
  };

  test('as agent: git, curl, jq, npm, a C program compiled and run, a Python venv, and sudo without a password', { timeout: 20 * 60_000 }, async () => {
    assert.equal(await ok('id -un; id -u'), 'agent\n1000');
    assert.match(await ok('git --version'), /^git version 2\.\d+/);
    assert.match(await ok('curl --version | head -1'), /^curl 8\.\d+/);
    assert.equal(await ok(`echo '{"tools":["git","jq","npm"]}' | jq -r '.tools | length'`), '3');
    assert.equal(await ok('npm --version'), '10.9.9');
    assert.match(await ok('fd --version; rg --version | head -1; make --version | head -1'), /^fdfind \d.*\nripgrep \d.*\nGNU Make \d/);
    const hello = await ok(
      ['mkdir -p hello && cd hello', "cat > hello.c <<'EOF'", '#include <stdio.h>', 'int main(void) { printf("hello from %s\\n", "cc"); return 0; }', 'EOF', 'cc -O1 -o hello hello.c && ./hello'].join('\n'),
    );
    assert.equal(hello, 'hello from cc');
    assert.equal(await ok('sudo -n true && sudo -n id -u'), '0');
    // A venv without pip: with it, ensurepip compiles pip's thousand modules, minutes under emulation.
    assert.equal(await ok('python3 -m venv --without-pip venv && venv/bin/python -c "import sys; print(sys.prefix != sys.base_prefix)"'), 'True');
    assert.match(await ok('python3 -m pip --version'), /^pip \d+/);
  });

  test('GET /v1/api/images/base lists what the VM holds, at the versions it holds, and the VM has no documentation', { timeout: 5 * 60_000 }, async () => {
    const res = await api('GET', '/v1/api/images/base');
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.status, 'ready');
    assert.ok(res.body.size_bytes > 0);
    const listed = new Map<string, string>(res.body.packages.map((p: { name: string; version: string }) => [p.name, p.version]));
    for (const name of ['git', 'curl', 'sudo', 'build-essential', 'python3', 'python3-venv', 'nodejs', 'jq', 'ripgrep', 'fd-find', 'vim-tiny']) {
      assert.ok(listed.has(name), `${name} is in the manifest`);
    }
    const inVm = parseDpkgQuery(await ok("dpkg-query -W -f '${db:Status-Status} ${Package} ${Version}\\n'"));
    assert.deepEqual(inVm, res.body.packages.filter((p: { name: string }) => p.name !== 'npm'));
    assert.equal(listed.get('npm'), await ok('npm --version'));
    assert.equal(await ok('ls -A /usr/share/man /usr/share/info 2>/dev/null | grep -v : | grep -c . || true'), '0');
    assert.equal(await ok('ls /usr/share/doc/git'), 'copyright');
    assert.equal(await ok('test -e /etc/dpkg/dpkg.cfg.d/agentvm-nodoc && stat -c %a /etc/sudoers.d/agentvm-agent'), '440');
  });
});
