/**
 * Attacks from inside a VM on its host and on the guest's own root, each refused:
 * - the files API acts as the VM's user: a directory swapped for a link to /etc while uploads go into
 *   it never lets a byte or an owner change reach /etc; a link out, or a file only root may read, is
 *   neither read nor written through it;
 * - a guest that floods: a line longer than the host's cap, a shell stream sent past its window, a
 *   run's output past its cap. The host keeps none of it beyond its caps and stays up.
 * The caps are checked alone first (no VM); then in a real microVM whose agent is taken over by a
 * program of root's (as a guest with a root exploit would). Needs QEMU and a built guest image
 * (AGENTVM_TEST_IMAGE_DIR). The VM's egress is `none`.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { WebSocket } from 'ws';
import { loadConfig } from '../src/config.ts';
import { startServer, type RunningServer } from '../src/server.ts';
import { createLogger } from '../src/log.ts';
import * as channel from '../src/vmm/channel.ts';
import { FRAME, frameHeader } from '../src/wire/frames.ts';
import type { MuxStream } from '../src/wire/muxStream.ts';
import { StreamMux } from '../src/wire/streams.ts';
import { apiClient, killQemusUnder, rawRun, until, type ApiCall } from './helpers.ts';

const imageDir = process.env.AGENTVM_TEST_IMAGE_DIR;
const skip = imageDir ? false : 'set AGENTVM_TEST_IMAGE_DIR to a built image dir (npm run test:all does)';
const ADMIN = 'avm_admin_test_token_0123456789abcdefghijkl';
const MiB = 1024 * 1024;
const { connectAgent, agentRequest } = channel;
/** The host's cap on a line from a guest. */
const MAX_LINE: number = (channel as { MAX_LINE?: number }).MAX_LINE ?? 32 * MiB;

/** The most this process's memory (heap and buffers) grew over its level when `fn` began. */
async function growthDuring(fn: () => Promise<void>): Promise<number> {
  const level = () => {
    const m = process.memoryUsage();
    return m.heapUsed + m.external;
  };
  const base = level();
  let peak = base;
  const timer = setInterval(() => (peak = Math.max(peak, level())), 10);
  try {
    await fn();
  } finally {
    clearInterval(timer);
  }
  return Math.max(peak, level()) - base;
}

describe('the host caps what a guest sends (no VM)', () => {
  test('a line over the cap is dropped as it comes: its request fails, the next is answered', { timeout: 60_000 }, async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-line-'));
    const sock = path.join(dir, 'agent.sock');
    const server = net.createServer((c) => {
      let seen = '';
      c.on('data', (d) => {
        seen += d.toString();
        let nl: number;
        while ((nl = seen.indexOf('\n')) >= 0) {
          const req = JSON.parse(seen.slice(0, nl)) as { id: number; args: { big?: boolean } };
          seen = seen.slice(nl + 1);
          if (!req.args?.big) c.write(`${JSON.stringify({ id: req.id, ok: true, result: { small: true } })}\n`);
          else {
            // Four times the cap, in pieces as a port would bring them.
            c.write(`{"id":${req.id},"ok":true,"result":{"pad":"`);
            const mib = Buffer.alloc(MiB, 'x');
            for (let i = 0; i < (4 * MAX_LINE) / MiB; i++) c.write(mib);
            c.write('"}}\n');
          }
        }
      });
    });
    await new Promise<void>((r) => server.listen(sock, r));
    try {
      const ch = await connectAgent(sock);
      const overflows: unknown[] = [];
      ch.on('overflow', (o) => overflows.push(o));
      let answer: unknown;
      const growth = await growthDuring(async () => {
        answer = await agentRequest(ch, 'ping', { big: true }, 60_000).then(
          () => 'answered',
          (err: Error) => err.message,
        );
      });
      assert.match(String(answer), /longer than .* and was dropped/);
      // At most the cap is held (a line may be that long), never the whole line.
      assert.ok(growth < MAX_LINE * 3, `memory grew by ${Math.round(growth / MiB)} MiB for a line of ${(4 * MAX_LINE) / MiB} MiB`);
      assert.equal(overflows.length, 1);
      assert.deepEqual(await agentRequest(ch, 'ping', {}, 10_000), { small: true });
      ch.close();
    } finally {
      server.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('a stream sent past its window is cut, both sides told; an honest writer is not', { timeout: 10_000 }, async () => {
    let b: StreamMux;
    const violations: string[] = [];
    const a = new StreamMux((bytes) => queueMicrotask(() => b.feed(bytes)));
    b = new StreamMux((bytes) => queueMicrotask(() => a.feed(bytes)), undefined, (what) => violations.push(what));
    // Honest: 3 windows' worth, the reader granting as it takes.
    const honestA = a.open(7);
    const honestB = b.open(7);
    let got = 0;
    honestB.on('data', (d: Buffer) => ((got += d.length), honestB.consumed(d.length)));
    await honestA.write(Buffer.alloc(3 * honestA.window));
    await until('the honest bytes', async () => got === 3 * honestA.window, 5000);
    assert.equal(honestB.fault, null);
    // Hostile: data frames straight onto the port, no credit asked for.
    const victim: MuxStream = b.open(9);
    const cut = new Promise((resolve) => victim.on('abort', resolve));
    const told = new Promise((resolve) => a.open(9).on('abort', resolve));
    let kept = 0;
    victim.on('data', (d: Buffer) => (kept += d.length));
    const payload = Buffer.alloc(200 * 1024);
    for (let i = 0; i < 20; i++) b.feed(Buffer.concat([frameHeader(9, FRAME.data, payload.length), payload]));
    assert.deepEqual(((await cut) as { error: string }).error, 'window_exceeded');
    assert.equal(((await told) as { error: string }).error, 'window_exceeded');
    assert.ok(kept <= victim.window, `${kept} bytes delivered past a window of ${victim.window}`);
    assert.equal(violations.length, 1);
  });
});

/**
 * A program of root's in the guest that takes the guest agent's place: it stops the agent, takes its
 * two ports (pidfd_getfd) and answers the host itself, sending what an honest agent never would.
 */
const ROGUE = String.raw`
use strict;
# In a session of its own by now (setsid): the exec that started it may end, and its group with it.
open(my $pf, '>', '/run/rogue.pid') or die; print $pf "$$\n"; close $pf;
sub port { my $want = shift; for my $d (glob '/sys/class/virtio-ports/*') { open(my $f, '<', "$d/name") or next; my $n = <$f>; chomp $n; return '/dev/' . (split m{/}, $d)[-1] if $n eq $want } die "no port $want" }
my ($ap, $dp) = (port('agentvm.0'), port('agentvm.data'));
sub cmdline { open(my $f, '<', "/proc/$_[0]/cmdline") or return ''; local $/; <$f> // '' }
my ($agent) = grep { cmdline($_) =~ m{/opt/agentvm/agent\.mjs} } grep { /^\d+$/ } map { (split m{/})[-1] } glob '/proc/*';
die 'no agent' unless $agent;
sub fdof { my ($pid, $dev) = @_; for (glob "/proc/$pid/fd/*") { my $l = readlink($_) // ''; return (split m{/})[-1] if $l eq $dev } undef }
# Its readers of the data port (a cat), stopped with it.
my @cats = grep { my $p = $_; defined fdof($p, $dp) && $p != $agent } grep { /^\d+$/ } map { (split m{/})[-1] } glob '/proc/*';
if ($ENV{DRY}) { print join(' ', $ap, $dp, $agent, fdof($agent, $ap) // '-', fdof($agent, $dp) // '-', @cats), "\n"; exit }
select(undef, undef, undef, 1);   # its answer to the exec that started this goes out first
kill 'STOP', $agent, @cats;
my $pidfd = syscall(434, 0 + $agent, 0);
die "pidfd_open: $!" if $pidfd < 0;
my ($afd, $dfd) = map { my $n = syscall(438, 0 + $pidfd, 0 + $_, 0); die "pidfd_getfd: $!" if $n < 0; $n } fdof($agent, $ap), fdof($agent, $dp);
open(my $A, '+<&=', $afd) or die; open(my $D, '+<&=', $dfd) or die;
binmode $A; binmode $D; select($D); $| = 1; select($A); $| = 1;
fcntl($_, 4, 2) or die "F_SETFL: $!" for $A, $D;   # O_RDWR, blocking: the agent's are not
sub answer { print $A qq({"id":$_[0],"ok":true,"result":$_[1]}\n) }
my (%runs, $end);
$end = '{"exit_code":0,"signal":null,"timed_out":false,"cancelled":false,"duration_ms":5,"first_output_ms":1}';
while (defined(my $line = <$A>)) {
  my ($id) = $line =~ /^\{"id":(\d+)/ or next;
  my ($op) = $line =~ /"op":"(\w+)"/;
  if ($op eq 'ping' && $line =~ /"flood_mib":(\d+)/) {
    print $A qq({"id":$id,"ok":true,"result":{"pad":");
    my $mib = 'x' x (1 << 20);
    print $A $mib for 1 .. $1;
    print $A qq("}}\n);
  } elsif ($op eq 'ping') {
    answer($id, '{"pong":true,"rogue":true}');
  } elsif ($op eq 'data_sync') {
    my ($token) = $line =~ /"token":"([0-9a-f]+)"/;
    print $D "\n~agentvm-data-sync~$token~\n";
    answer($id, '{"synced":true}');
  } elsif ($op eq 'shell_open') {
    my ($stream) = $line =~ /"stream":(\d+)/;
    answer($id, '{"pid":1,"tty":"/dev/pts/99"}');
    my $payload = 'y' x (262144 - 9);
    my $frame = pack('NCN', $stream, 0, length $payload) . $payload;
    print $D $frame for 1 .. 512;   # 128 MiB, no credit asked for
  } elsif ($op eq 'run_start') {
    my ($run) = $line =~ /"run_id":"(run_\w+)"/;
    answer($id, '{"started":true,"last_seq":0,"ended":false}');
    my $text = 'z' x 65536;
    $runs{$run} = [map { qq({"seq":$_,"stream":"stdout","text":"$text"}) } 1 .. 16];
    print $A qq({"event":"run_output","run_id":"$run",), substr($_, 1), "\n" for @{$runs{$run}};
    print $A qq({"event":"run_end","run_id":"$run","last_seq":16,"end":$end}\n);
  } elsif ($op eq 'run_sync') {
    my ($run) = $line =~ /"run_id":"(run_\w+)"/;
    my ($after) = $line =~ /"after":(\d+)/;
    my @c = $runs{$run} ? @{$runs{$run}}[$after .. 15] : ();
    answer($id, $runs{$run} ? '{"known":true,"chunks":[' . join(',', @c) . '],"last_seq":16,"end":' . $end . '}' : '{"known":false,"chunks":[],"last_seq":0,"end":null}');
  } else {
    answer($id, '{}');
  }
}
`;

describe('attacks from inside a real microVM', { skip }, () => {
  let dataDir: string;
  let server: RunningServer;
  let api: ApiCall;
  let key: string;
  let vmId: string;
  const logs: string[] = [];

  before(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-attacks-'));
    process.env.AGENTVM_ADMIN_TOKEN = ADMIN;
    const config = { ...loadConfig({ host: '127.0.0.1', port: 0, dataDir }), imageDir: imageDir! };
    delete process.env.AGENTVM_ADMIN_TOKEN;
    const sink = new Writable({
      write: (c, _e, cb) => {
        logs.push(c.toString());
        cb();
      },
    });
    server = await startServer(config, createLogger('info', sink));
    await server.host.imageReady;
    const admin = apiClient(() => server.url, ADMIN);
    const tenant = await admin('POST', '/v1/admin/tenants', { email: 'attacks@example.com' });
    await admin('PUT', `/v1/admin/tenants/${tenant.body.tenant_id}/card`, { brand: 'visa', last4: '4242' });
    key = tenant.body.api_key;
    api = apiClient(() => server.url, key);
    await server.host.prewarmed;
    const created = await api('POST', '/v1/api/vms', { harness: 'echo', egress: { mode: 'none', allow: [] } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    vmId = created.body.vm_id;
    await until(`${vmId} running`, async () => {
      const vm = (await api('GET', `/v1/api/vms/${vmId}`)).body;
      if (vm.status === 'failed') throw new Error(`failed: ${vm.status_reason}`);
      return vm.status === 'running';
    }, 10 * 60_000);
  });

  after(async () => {
    await server?.close({ stopVms: true });
    await killQemusUnder(dataDir);
    await rm(dataDir, { recursive: true, force: true });
  });

  /** A command in the guest, as root or as the VM's user. */
  const sh = async (script: string, as: 'root' | 'agent' = 'root', stdin?: string) => {
    const r = await server.host.driver!.exec(vmId, { argv: ['sh', '-c', script], stdin, ...(as === 'agent' ? { uid: 1000, gid: 1000 } : {}) }, 60_000);
    assert.equal(r.exit_code, 0, `${script}: ${r.stderr}`);
    return r.stdout.trim();
  };
  const put = (p: string, body: string) =>
    fetch(`${server.url}/v1/api/vms/${vmId}/files?path=${encodeURIComponent(p)}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream' },
      body,
    });
  const get = (p: string) => fetch(`${server.url}/v1/api/vms/${vmId}/files?path=${encodeURIComponent(p)}`, { headers: { authorization: `Bearer ${key}` } });

  test('uploads into a directory the VM user keeps swapping for a link to /etc never touch /etc', { timeout: 10 * 60_000 }, async () => {
    const before = await sh('sha256sum /etc/shadow /etc/passwd; stat -c "%U %a %n" /etc /etc/shadow');
    await sh('mkdir -p /persist/workspace/race && touch /tmp/race-mark', 'agent');
    // The user's loop: whenever the directory `d` is there, it is moved aside and a link to /etc takes
    // its name for a moment.
    // It looks a thousand times a second (a busier loop would starve the guest's one vCPU).
    const loop = 'chdir "/persist/workspace/race" or die; open(my $f, ">", "started") or die; close $f; my $n = 0; until (-e "stop") { if (!-l "d" && rename "d", "old" . ++$n) { symlink "/etc", "d"; select(undef, undef, undef, 0.002); unlink "d" } else { select(undef, undef, undef, 0.001) } }';
    // Started in a session of its own before the exec ends (its group is killed then).
    await sh(`setsid perl -e '${loop}' </dev/null >/dev/null 2>&1 & until [ -e /persist/workspace/race/started ]; do sleep 0.05; done`, 'agent');
    const answers = new Map<number, number>();
    try {
      for (let i = 0; i < 60; i++) {
        const r = await put(`race/d/f${i}`, `upload ${i}\n`);
        answers.set(r.status, (answers.get(r.status) ?? 0) + 1);
        await r.arrayBuffer();
      }
    } finally {
      await sh('touch /persist/workspace/race/stop', 'agent');
    }
    assert.equal(await sh('sha256sum /etc/shadow /etc/passwd; stat -c "%U %a %n" /etc /etc/shadow'), before, `after ${JSON.stringify([...answers])}`);
    assert.equal(await sh('find /etc -maxdepth 1 -cnewer /tmp/race-mark | head'), '', 'nothing in /etc changed');
    assert.equal(await sh('find /etc -maxdepth 1 -regex "/etc/f[0-9]+"; find /etc -name "*agentvm-upload*" | head'), '');
    // What was written belongs to the user, where the user can write.
    assert.equal(await sh('find /persist/workspace/race ! -user agent | head'), '');
    // Each upload was written or refused (400: the link leads off the disk; 404: `d` was gone).
    assert.deepEqual([...answers.keys()].filter((s) => ![201, 400, 404].includes(s)), [], JSON.stringify([...answers]));
    assert.ok((answers.get(400) ?? 0) + (answers.get(404) ?? 0) > 0, `the loop was seen at work: ${JSON.stringify([...answers])}`);
  });

  test('a link out, and files only root may read or write, are neither read nor written through the API', { timeout: 5 * 60_000 }, async () => {
    await sh('mkdir -p /persist/workspace/priv && echo topsecret > /persist/workspace/priv/root-only && chmod 600 /persist/workspace/priv/root-only && chmod 755 /persist/workspace/priv');
    await sh('cd /persist/workspace && ln -sfn /etc/shadow out && ln -sfn priv/root-only in && ln -sfn /persist/lost+found lf', 'agent');
    for (const p of ['out', 'in', 'priv/root-only', '/persist/lost+found', 'lf']) {
      const r = await get(p);
      const text = await r.text();
      assert.equal(r.status, 400, `GET ${p}: ${r.status} ${text.slice(0, 200)}`);
      assert.match(JSON.parse(text).message, /^path: /);
      assert.doesNotMatch(text, /topsecret|root:/);
    }
    for (const p of ['out', 'in', 'priv/root-only', 'priv/new', '/persist/lost+found/x', 'lf/x', '/persist/planted']) {
      const r = await put(p, 'owned\n');
      const text = await r.text();
      assert.equal(r.status, 400, `PUT ${p}: ${r.status} ${text}`);
      assert.match(JSON.parse(text).message, /^path: /);
    }
    assert.equal(await sh('cat /persist/workspace/priv/root-only'), 'topsecret');
    assert.equal(await sh('ls -A /persist/workspace/priv /persist/lost+found | grep -v -e "^/" -e "^root-only$" -e "^$" | head; ls /persist/planted 2>/dev/null; true'), '');
    assert.equal(await sh('grep -c owned /etc/shadow; true'), '0');
    // What the user may read and write goes as before, through links that stay on the disk too.
    assert.equal((await put('mine/notes.txt', 'mine\n')).status, 201);
    await sh('ln -sfn mine/notes.txt /persist/workspace/via', 'agent');
    assert.equal(await (await get('via')).text(), 'mine\n');
    assert.equal((await put('via', 'through\n')).status, 201);
    assert.equal(await sh('cat /persist/workspace/mine/notes.txt; stat -c %U /persist/workspace/mine/notes.txt'), 'through\nagent');
  });

  test('a guest that floods: a huge line, a shell stream past its window, run output past its cap; the server keeps none of it', { timeout: 10 * 60_000 }, async () => {
    const driver = server.host.driver!;
    // Root in the guest takes the agent's place (the exec's answer may be lost as the agent stops).
    void driver.exec(vmId, { argv: ['sh', '-c', 'cat > /run/rogue.pl; setsid perl /run/rogue.pl </dev/null >/run/rogue.log 2>&1 & until [ -s /run/rogue.pid ]; do sleep 0.05; done'], stdin: ROGUE }, 60_000).catch(() => undefined);
    await until('the rogue answers', async () => ((await driver.request<{ rogue?: boolean }>(vmId, 'ping', {}, 2000).catch(() => ({}))) as { rogue?: boolean }).rogue, 60_000);

    // 1. An answer of 200 MiB, on one line: dropped as it comes, the request told so.
    let answer = '';
    const lineGrowth = await growthDuring(async () => {
      answer = await driver.request(vmId, 'ping', { flood_mib: 200 }, 120_000).then(
        () => 'answered',
        (err: Error) => err.message,
      );
    });
    assert.match(answer, /longer than/);
    assert.ok(lineGrowth < 100 * MiB, `the server grew by ${Math.round(lineGrowth / MiB)} MiB for a 200 MiB line`);
    await until('the log says so', async () => logs.some((l) => l.includes('the guest sent a line over the cap')), 10_000);
    assert.equal(((await driver.request(vmId, 'ping', {}, 10_000)) as { pong?: boolean }).pong, true, 'the channel goes on');

    // 2. A shell whose guest sends 128 MiB past its window to a client that reads nothing.
    const ticket = await api('POST', `/v1/api/vms/${vmId}/shell`);
    assert.equal(ticket.status, 201);
    const ws = new WebSocket(ticket.body.url);
    const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
    ws.on('error', () => undefined);
    let received = 0;
    ws.on('message', (d: Buffer) => (received += d.length));
    const shellGrowth = await growthDuring(async () => {
      await new Promise((r) => ws.once('open', r));
      ws.pause();
      // The rogue answers this once its flood is on the port.
      await driver.request(vmId, 'ping', {}, 120_000);
      await until('the port is read', async () => logs.some((l) => l.includes('window_exceeded') || l.includes('the guest broke the data port')) || undefined, 30_000).catch(() => undefined);
    });
    ws.resume();
    assert.ok(shellGrowth < 48 * MiB, `the server grew by ${Math.round(shellGrowth / MiB)} MiB for 128 MiB sent past a 2 MiB window`);
    const end = await Promise.race([closed, new Promise<null>((r) => setTimeout(() => r(null), 60_000))]);
    assert.ok(end, `the socket was not closed (${received} bytes came; the log: ${logs.filter((l) => /guest|data port|shell|window/.test(l)).slice(-5).join(' | ')})`);
    assert.equal(end.code, 1011);
    assert.match(end.reason, /^window_exceeded: /);
    // What the window let through, and what the sockets' kernel buffers took meanwhile (the host grants
    // credit as bytes leave it): a few MiB of the 128.
    assert.ok(received <= 16 * MiB, `${received} bytes reached the client`);

    // 3. A run of a 64 KiB cap whose guest sends 1 MiB: the host keeps 64 KiB and says what it cut.
    const run = await rawRun(server.services, server.host.executor!, vmId, ['true'], { maxOutputBytes: 64 * 1024 });
    assert.equal(run.status, 'succeeded');
    const note = `\n[agentvm: output truncated: ${15 * 65536} more bytes were not kept]\n`;
    assert.equal(run.stdout!.length, 65536 + note.length, `stdout of ${run.stdout!.length} characters`);
    assert.ok(run.stdout!.endsWith(note));
    assert.equal(run.stdout!.slice(0, 65536), 'z'.repeat(65536));
    assert.ok(logs.some((l) => l.includes('sent output past the cap')));

    // The server is up and answers.
    assert.equal((await api('GET', `/v1/api/vms/${vmId}`)).status, 200);
  });
});
