/**
 * Images of a tenant's own, through a real server and real microVMs: a Dockerfile built in a builder
 * VM (its log streamed), the step cache, a VM of the image whose runs take its ENV, WORKDIR and USER,
 * restart and reprovision, deletion while in use, and every refusal. The builds' egress is `none`, so
 * nothing leaves the machine. Needs QEMU and a built guest image (AGENTVM_TEST_IMAGE_DIR).
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createParser } from 'eventsource-parser';
import type { RunningServer } from '../src/server.ts';
import { apiClient, until, type ApiCall } from './helpers.ts';
import { startVmTestServer, type VmTestServer } from './vmServer.ts';
import { DPKG_QUERY_ARGS, parseDpkgQuery } from '../src/image/workstation.ts';
import { chainOf } from '../src/host/layerGc.ts';
import { stat } from 'node:fs/promises';

const imageDir = process.env.AGENTVM_TEST_IMAGE_DIR;
const skip = imageDir ? false : 'set AGENTVM_TEST_IMAGE_DIR to a built image dir (npm run test:all does)';
const b64 = (s: string) => Buffer.from(s).toString('base64');

/** The echo harness's program, put first on PATH by the image: it says where and as whom runs start. */
const FAKE_ECHO = `#!/bin/sh
printf '{"pwd":"%s","user":"%s","greeting":"%s","built":"%s"}\\n' "$(pwd)" "$(id -un)" "$GREETING" "$(cat /opt/tool/built.txt)"
`;
const dockerfile = (greeting: string, tag = '') => `# a tool image
FROM base
ARG GREETING=${greeting}
ENV GREETING=$GREETING TOOL_HOME=/opt/tool PATH=/opt/tool/bin:/usr/local/bin:/usr/bin:/bin
WORKDIR /opt/tool
COPY bin/ ./bin/
RUN chmod 755 bin/agentvm-echo && head -c 6000000 /dev/urandom > blob && echo "$GREETING from the build as $(id -un)${tag}" > built.txt
USER nobody
RUN [ "$(id -un)" = nobody ] && [ "$(pwd)" = /opt/tool ] && echo "as $(id -un) in $(pwd)"
`;

describe('images of your own, built from a Dockerfile', { skip }, () => {
  let t: VmTestServer;
  let server: RunningServer;
  let api: ApiCall;
  let stranger: ApiCall;
  let key: string;

  before(async () => {
    // A builder VM kept ready and a standby VM of the image last started (both off elsewhere in the
    // suite, scripts/test-all.sh): the first build takes the builder, the second VM of the image the
    // standby (no base standbys here; made whatever the machine's load, for a test on a busy machine).
    t = await startVmTestServer('images', { prewarmed: true, config: { standbyBuilders: 1, standbyImages: 1, standbyVms: 0, standbyIdleShare: 0 } });
    server = t.server;
    const { admin } = t;
    key = t.tenant.api_key;
    api = apiClient(server.url, key);
    stranger = apiClient(server.url, (await admin('POST', '/v1/admin/tenants', { email: 'other@example.com' })).body.api_key);
  });

  after(async () => {
    await t?.close();
  });

  /** The build's log as its event stream gives it, and the image it ends with. */
  async function readStream(imageId: string, lastEventId?: string): Promise<{ lines: string[]; ids: number[]; image: any }> {
    const out = { lines: [] as string[], ids: [] as number[], image: null as any };
    const res = await fetch(`${server.url}/v1/api/images/${imageId}/build/events`, {
      headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream', ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
    });
    assert.equal(res.status, 200);
    const parser = createParser({
      onEvent: (e) => {
        if (e.event === 'log') {
          out.lines.push(JSON.parse(e.data).text);
          out.ids.push(Number(e.id));
        } else if (e.event === 'end') out.image = JSON.parse(e.data);
      },
    });
    parser.feed(await res.text());
    return out;
  }

  async function build(greeting: string, tag = ''): Promise<{ lines: string[]; image: any }> {
    const r = await api('POST', '/v1/api/images', {
      name: 'Tool box',
      dockerfile: dockerfile(greeting, tag),
      files: { 'bin/agentvm-echo': b64(FAKE_ECHO) },
      egress: { mode: 'none', allow: [] },
    });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    assert.equal(r.body.status, 'queued');
    assert.equal(r.body.slug, 'tool-box');
    const { lines, image } = await readStream(r.body.image_id);
    assert.equal(image?.status, 'ready', lines.join('\n'));
    return { lines, image };
  }

  const runEcho = async (vmId: string) => {
    const r = await api('POST', `/v1/api/vms/${vmId}/run`, { task: 'where am I' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return JSON.parse(r.body.stdout.trim().split('\n').at(-1));
  };

  test('a build, its cache, a VM of it, restart, reprovision to a newer build, and deletion', { timeout: 20 * 60_000 }, async () => {
    await until('a builder VM is kept ready', async () => (server.host.buildersReady?.() ?? 0) > 0);
    const first = await build('hello');
    assert.ok(first.lines.includes('it was kept ready: its programs run warm'), first.lines.join('\n'));
    assert.ok(first.lines.some((l) => /^step 5\/7: RUN chmod/.test(l)), first.lines.join('\n'));
    assert.ok(first.lines.some((l) => /starting a builder VM \(egress none/.test(l)));
    assert.ok(first.lines.includes('as nobody in /opt/tool'), 'a RUN after USER runs as that user, in the WORKDIR');
    assert.ok(!first.lines.some((l) => /\(cached\)/.test(l)), 'nothing was cached the first time');
    assert.ok(first.image.size_bytes > 0);
    // Each layer holds what its step wrote: the 6 MB a RUN wrote are in its layer, not in the ones before
    // and after it. Four layers: WORKDIR, COPY, RUN, and the last RUN with the image's config (one layer).
    const [{ layer_path }] = await server.services.db.query<{ layer_path: string }>('SELECT layer_path FROM images WHERE image_id = $1', [first.image.image_id]);
    const sizes = await Promise.all((await chainOf(layer_path)).map(async (f) => (await stat(f)).size));
    assert.ok(sizes.length === 4 && sizes[1] > 6e6 && sizes[0] < 3e6 && sizes[2] < 3e6, `layers, newest first: ${sizes.join(', ')} bytes`);
    assert.ok(first.image.packages.some((p: { name: string }) => p.name === 'nodejs'), 'the packages are listed');
    // The same Dockerfile again: every step from the cache, no builder VM.
    const again = await build('hello');
    assert.notEqual(again.image.image_id, first.image.image_id, 'each build is a new image');
    assert.equal(again.lines.filter((l) => /\(cached\)$/.test(l)).length, 7, again.lines.join('\n'));
    assert.ok(!again.lines.some((l) => /builder VM/.test(l)));
    assert.deepEqual(again.image.packages, first.image.packages, 'a build from the cache has the packages its layers were built with');
    assert.equal((await api('GET', '/v1/api/images/tool-box')).body.image_id, again.image.image_id, 'the slug names the newest ready build');
    assert.equal((await stranger('GET', `/v1/api/images/${first.image.image_id}`)).status, 404, 'a private image is its tenant\'s');

    const created = await api('POST', '/v1/api/vms', { harness: 'echo', image: 'tool-box', egress: { mode: 'none', allow: [] } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const vmId = created.body.vm_id;
    const running = async () =>
      until(`${vmId} running`, async () => {
        const vm = (await api('GET', `/v1/api/vms/${vmId}`)).body;
        if (vm.status === 'failed') throw new Error(`failed: ${vm.status_reason}`);
        return vm.status === 'running' && vm;
      });
    assert.equal((await running()).image, again.image.image_id);
    const exec = (argv: string[]) => server.host.driver!.exec(vmId, { argv }, 180_000);
    // Its build changed no Debian package: its list is the base image's, and that is what its root holds.
    assert.deepEqual(again.image.packages, parseDpkgQuery((await exec(['dpkg-query', ...DPKG_QUERY_ARGS])).stdout), "the image's packages are those of its root");
    assert.deepEqual(await runEcho(vmId), { pwd: '/opt/tool', user: 'nobody', greeting: 'hello', built: 'hello from the build as root' });
    // The image's first VM started from the golden snapshot; a standby of the image is made after it,
    // and the next VM of the image takes it: the image's root, ENV, WORKDIR and USER all the same.
    const driver = server.host.driver!;
    assert.equal(driver.phases.get(vmId)?.standby_assume_ms, undefined, 'no standby of the image was there yet');
    await until('a standby VM of the image', async () => driver.standbyCount('images') === 1);
    const next = (await api('POST', '/v1/api/vms', { harness: 'echo', image: 'tool-box', egress: { mode: 'none', allow: [] } })).body.vm_id;
    await t.untilStatus(next, 'running');
    assert.ok(driver.phases.get(next)?.standby_assume_ms !== undefined, `it took the standby: ${JSON.stringify(driver.phases.get(next))}`);
    assert.deepEqual(await runEcho(next), { pwd: '/opt/tool', user: 'nobody', greeting: 'hello', built: 'hello from the build as root' });
    assert.equal(await t.sh(next, 'hostname'), next.replace(/_/g, '-').toLowerCase(), 'it took its own identity');
    assert.equal((await api('DELETE', `/v1/api/vms/${next}`)).status, 200);
    // The image's last layer was taken with its filesystem frozen: the VM's root mounted without a journal to replay.
    const kernel = (await exec(['dmesg'])).stdout;
    assert.match(kernel, /EXT4-fs \(sd[a-z]\): mounted/);
    assert.doesNotMatch(kernel, /recovery complete/);

    // Restart: the root is the image's again.
    await exec(['sh', '-c', 'echo scratch > /opt/tool/scratch && rm /opt/tool/built.txt && sync']);
    const restart = await api('POST', `/v1/api/vms/${vmId}/restart`);
    assert.equal(restart.status, 200);
    assert.equal(restart.body.status, 'restarting');
    await running();
    assert.equal((await exec(['sh', '-c', 'ls /opt/tool'])).stdout.split('\n').filter(Boolean).sort().join(','), 'bin,blob,built.txt');

    // A newer build of the name; reprovision moves the VM to it.
    // A changed RUN: the steps before it come from the cache, it and the ones after run again.
    const newer = await build('hello', ' (v2)');
    assert.ok(newer.lines.some((l) => /step 4\/7: COPY bin\/ \.\/bin\/ \(cached\)/.test(l)), 'steps before the changed one come from the cache');
    assert.ok(newer.lines.some((l) => /^step 5\/7: RUN chmod.*\(v2\)" > built.txt$/.test(l)), 'the changed RUN runs again');
    assert.equal((await api('POST', `/v1/api/vms/${vmId}/reprovision`)).status, 200);
    await until('reprovisioned', async () => {
      const vm = (await api('GET', `/v1/api/vms/${vmId}`)).body;
      return vm.status === 'running' && vm.image === newer.image.image_id;
    });
    assert.equal((await runEcho(vmId)).built, 'hello from the build as root (v2)');

    // Deletion waits for its users.
    const inUse = await api('DELETE', `/v1/api/images/${newer.image.image_id}`);
    assert.equal(inUse.status, 409);
    assert.equal(inUse.body.error, 'image_in_use');
    assert.match(inUse.body.message, /1 VM/);
    assert.equal((await api('DELETE', `/v1/api/images/${first.image.image_id}`)).status, 200, 'an image no VM uses goes');
    assert.equal((await api('GET', `/v1/api/images/${first.image.image_id}`)).status, 404);
    assert.equal((await api('DELETE', `/v1/api/vms/${vmId}`)).status, 200);
    assert.equal((await api('DELETE', `/v1/api/images/${newer.image.image_id}`)).status, 200);
    const list = await api('GET', '/v1/api/images');
    assert.deepEqual(list.body.data.map((i: any) => i.image_id), [again.image.image_id]);
  });

  test('a failing RUN fails the build naming its line; refusals change nothing', { timeout: 10 * 60_000 }, async () => {
    const r = await api('POST', '/v1/api/images', { name: 'broken', dockerfile: 'FROM base\nRUN echo about to fail && exit 3\n', egress: { mode: 'none', allow: [] } });
    assert.equal(r.status, 202);
    const { lines, image } = await readStream(r.body.image_id);
    assert.equal(image.status, 'failed');
    assert.equal(image.status_reason, 'line 2: RUN echo about to fail && exit 3 exited with 3; its output ended:\nabout to fail');
    assert.ok(lines.includes('about to fail'), lines.join('\n'));
    const resumed = await readStream(r.body.image_id, '1');
    assert.equal(resumed.ids[0], 2, 'Last-Event-ID: the stream goes on after it');
    assert.equal(resumed.image.status, 'failed');
    const before = (await api('GET', '/v1/api/images')).body.total;
    const refused: Array<[unknown, number, RegExp]> = [
      [{ name: 'x', dockerfile: 'FROM base\nHEALTHCHECK CMD true' }, 400, /dockerfile: line 2: HEALTHCHECK is not supported/],
      [{ name: 'x', dockerfile: 'FROM base\nCOPY missing.txt /x' }, 400, /line 2: missing.txt is not among the build's files/],
      [{ name: 'x', dockerfile: 'FROM img_nope' }, 400, /FROM img_nope: no image/],
      [{ name: 'x', dockerfile: 'FROM base', files: { '../x': b64('x') } }, 400, /may not hold "\.\."/],
      [{ name: 'x', dockerfile: 'FROM base', files: { a: 'not base64!' } }, 400, /must be base64/],
      [{ name: 'x', dockerfile: 'FROM base', egress: { mode: 'allowlist', allow: ['@nope'] } }, 400, /not a preset/],
      [{ name: '', dockerfile: 'FROM base' }, 400, /name/],
      [{ name: 'x', dockerfile: 'FROM base', files: { big: Buffer.alloc(17 * 1024 * 1024).toString('base64') } }, 413, /16 MiB/],
    ];
    for (const [body, status, why] of refused) {
      const res = await api('POST', '/v1/api/images', body);
      assert.equal(res.status, status, JSON.stringify(res.body));
      assert.match(res.body.message, why);
    }
    assert.equal((await api('GET', '/v1/api/images')).body.total, before, 'no refused request made an image');
    assert.equal((await api('POST', '/v1/api/vms', { harness: 'echo', image: 'img_nope' })).status, 400);
    assert.equal((await api('GET', '/v1/api/images/base')).body.image_id, 'base');
  });
});
