// The egress gateway: what it adds to a request and how fast bytes go through it. Runs itself again
// inside a network namespace of its own with nothing but loopback (a VM reaches out here), with the
// downloaded host a stand-in on loopback pinned by name. In the same run, as baselines: the same
// client on the host straight to the stand-in, and inside the guest over its own loopback (what the
// emulated guest can move at all). Targets (issue): the gateway adds ≤ 5 ms p50 to a request measured
// at the gateway, and keeps ≥ 50% of the host's MiB/s.
import { spawn } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pct, report, row } from './report.ts';
import { spawnInOwnNetns } from '../test/netns.ts';

const FLAG = 'AGENTVM_BENCH_IN_NETNS';
const N = Number(process.env.BENCH_REQUESTS ?? 100);
const MIB = 50;

if (process.env[FLAG] !== '1') {
  const child = spawnInOwnNetns(['--import', 'tsx', fileURLToPath(import.meta.url)], 'inherit', FLAG);
  process.exitCode = await new Promise<number>((resolve) => child.on('close', (code) => resolve(code ?? 1)));
} else {
  // The downloaded host in a process of its own, as a real one is (not sharing the gateway's thread).
  const siteProc = spawn(
    process.execPath,
    ['--import', 'tsx', '-e', `import('${new URL('../test/standins/echoHost.ts', import.meta.url).href}').then((m) => m.startEchoHost({ name: 'bench.test' })).then((h) => console.log(h.url))`],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const siteUrl = await new Promise<string>((resolve, reject) => {
    siteProc.stdout!.once('data', (c: Buffer) => resolve(c.toString().trim()));
    siteProc.once('exit', (code) => reject(new Error(`the stand-in host exited (${code})`)));
  });
  const site = { close: async () => void siteProc.kill('SIGTERM') };
  const port = Number(new URL(siteUrl).port);
  process.env.AGENTVM_EGRESS_HOSTS = 'bench.test=127.0.0.1';
  const { startBenchPlatform } = await import('./platform.ts');
  const { server, base, h, close } = await startBenchPlatform('egressbench');
  try {
    const created = await (await fetch(`${base}/v1/api/vms`, { method: 'POST', headers: h, body: JSON.stringify({ harness: 'echo', egress: { mode: 'allowlist', allow: ['bench.test'] } }) })).json();
    const vmId = created.vm_id as string;
    for (;;) {
      const vm = await (await fetch(`${base}/v1/api/vms/${vmId}`, { headers: h })).json();
      if (vm.status === 'running') break;
      if (vm.status === 'failed') throw new Error(vm.status_reason);
      await new Promise((r) => setTimeout(r, 100));
    }
    // A host process reaches the gateway as a connection of the VM: a socket of the bench's own whose
    // connections are handed to the gateway for this VM (the VM's own come on its data port).
    const socket = path.join(server.host.driver!.opts.vmsDir, `egressbench-${vmId}.sock`);
    const gateway = (server.host as unknown as { gateway: { accept(vmId: string, socket: net.Socket): void } }).gateway;
    const relay = net.createServer((c) => gateway.accept(vmId, c));
    await new Promise<void>((resolve) => relay.listen(socket, resolve));

    // 1. At the gateway: one request per connection, handed to the gateway as the VM's and straight
    //    to the stand-in, in turns.
    const once = (connect: () => net.Socket, target: string) =>
      new Promise<number>((resolve, reject) => {
        const t = performance.now();
        const req = http.request({ createConnection: connect, path: target, headers: { host: `bench.test:${port}`, connection: 'close' } }, (res) => {
          res.resume();
          res.on('end', () => (res.statusCode === 200 ? resolve(performance.now() - t) : reject(new Error(`status ${res.statusCode}`))));
        });
        req.on('error', reject);
        req.end();
      });
    const viaGateway: number[] = [];
    const direct: number[] = [];
    for (let i = 0; i < N + 5; i++) {
      const g = await once(() => net.connect(socket), `http://bench.test:${port}/`);
      const d = await once(() => net.connect(port, '127.0.0.1'), '/');
      if (i >= 5) (viaGateway.push(g), direct.push(d));
      // Within the gateway's 50 new connections a second per VM (not timed).
      await new Promise((r) => setTimeout(r, 25));
    }

    // 2. From inside the VM: request round trips and a 50 MiB download through the gateway, and the
    //    same download over the guest's own loopback.
    const guest = (script: string, args: string[]) =>
      server.host.driver!.exec(vmId, { argv: ['node', '-e', script, ...args], uid: 1000, gid: 1000 }, 600_000).then((r) => {
        if (r.exit_code !== 0) throw new Error(r.stderr);
        return JSON.parse(r.stdout.trim().split('\n').at(-1)!);
      });
    const GET = `
      const http = require('http');
      const get = (url, proxied) => new Promise((resolve, reject) => {
        const t = performance.now();
        let n = 0;
        const o = proxied ? { host: 'gateway.agentvm.internal', port: 3128, path: url, agent: false } : { ...new URL(url), agent: false };
        if (!proxied) { const u = new URL(url); o.host = u.hostname; o.port = u.port; o.path = u.pathname + u.search; }
        http.get(o, (res) => { res.on('data', (c) => (n += c.length)); res.on('end', () => resolve({ ms: performance.now() - t, bytes: n })); }).on('error', reject);
      });`;
    const rtt = await guest(`${GET}
      (async () => { const ms = []; for (let i = 0; i < Number(process.argv[2]) + 3; i++) { const r = await get(process.argv[1], true); if (i >= 3) ms.push(r.ms); } console.log(JSON.stringify(ms)); })();`, [
      `http://bench.test:${port}/`,
      String(Math.min(N, 40)),
    ]);
    const bytes = MIB * 2 ** 20;
    const download = await guest(`${GET} get(process.argv[1], true).then((r) => console.log(JSON.stringify(r)));`, [`http://bench.test:${port}/bytes?n=${bytes}`]);
    const guestLoop = await guest(`${GET}
      const buf = Buffer.alloc(65536, 97);
      const s = http.createServer((req, res) => { let left = Number(process.argv[1]); res.writeHead(200, { 'content-length': left });
        const more = () => { while (left > 0) { const c = buf.subarray(0, Math.min(left, buf.length)); left -= c.length; if (!res.write(c)) return res.once('drain', more); } res.end(); }; more(); });
      s.listen(0, '127.0.0.1', () => get('http://127.0.0.1:' + s.address().port + '/', false).then((r) => { console.log(JSON.stringify(r)); s.close(); }));`, [String(bytes)]);
    if (download.bytes !== bytes || guestLoop.bytes !== bytes) throw new Error(`short download: ${download.bytes}, ${guestLoop.bytes}`);

    // 3. The same download on the host, by a client process of its own (as a guest is): straight to
    //    the stand-in, and through the gateway as the VM's connection.
    const hostGet = (via: 'direct' | 'gateway' | 'tunnel') =>
      new Promise<number>((resolve, reject) => {
        const script = `
          const http = require('http'), net = require('net');
          const [via, sock, port, n] = process.argv.slice(1);
          const t = performance.now();
          let got = 0;
          const get = (connect) => http.get({ createConnection: connect, path: (via === 'gateway' ? 'http://bench.test:' + port : '') + '/bytes?n=' + n, headers: { host: 'bench.test:' + port } }, (res) => {
            res.on('data', (c) => (got += c.length));
            res.on('end', () => console.log(JSON.stringify({ ms: performance.now() - t, bytes: got })));
          });
          if (via === 'tunnel') {
            // CONNECT (what HTTPS does), then the same request inside the tunnel.
            const s = net.connect(sock, () => s.write('CONNECT bench.test:' + port + ' HTTP/1.1\\r\\n\\r\\n'));
            s.once('data', (d) => { if (!String(d).startsWith('HTTP/1.1 200')) throw new Error(String(d)); get(() => s); });
          } else get(() => (via === 'gateway' ? net.connect(sock) : net.connect(Number(port), '127.0.0.1')));`;
        const child = spawn(process.execPath, ['-e', script, via, socket, String(port), String(bytes)], { stdio: ['ignore', 'pipe', 'inherit'] });
        let out = '';
        child.stdout.on('data', (c: Buffer) => (out += c.toString()));
        child.on('close', () => {
          try {
            const r = JSON.parse(out);
            if (r.bytes !== bytes) throw new Error(`short: ${r.bytes}`);
            resolve(r.ms);
          } catch (err) {
            reject(err);
          }
        });
      });
    const hostDirectMs = Math.min(await hostGet('direct'), await hostGet('direct'));
    const hostGatewayMs = Math.min(await hostGet('gateway'), await hostGet('gateway'));
    const hostTunnelMs = Math.min(await hostGet('tunnel'), await hostGet('tunnel'));

    const mibs = (ms: number) => MIB / (ms / 1000);
    const g50 = pct(viaGateway, 50);
    const d50 = pct(direct, 50);
    const hostMibs = mibs(hostDirectMs);
    const vmMibs = mibs(download.ms);
    await report(`Egress gateway (${N} requests each, ${MIB} MiB downloads, accel ${server.host.driver!.opts.accel})`, [
      row('egress', 'request at the gateway, p50 ms (added)', `${g50.toFixed(2)} (+${(g50 - d50).toFixed(2)})`, `${d50.toFixed(2)} straight to the host`, g50 / d50, 'adds ≤ 5 ms', g50 - d50 <= 5),
      row('egress', 'same, p95 ms', pct(viaGateway, 95).toFixed(2), pct(direct, 95).toFixed(2), pct(viaGateway, 95) / pct(direct, 95)),
      row('egress', 'request from inside the VM through the gateway, p50 ms', pct(rtt, 50).toFixed(1), `${d50.toFixed(2)} on the host`, pct(rtt, 50) / d50),
      row('egress', `${MIB} MiB download inside the VM through the gateway, MiB/s`, vmMibs.toFixed(1), `${hostMibs.toFixed(1)} host straight`, vmMibs / hostMibs, '≥ 50% of the host', vmMibs / hostMibs >= 0.5),
      row('egress', `${MIB} MiB over the guest's own loopback, MiB/s (what the guest can move)`, mibs(guestLoop.ms).toFixed(1), vmMibs.toFixed(1), mibs(guestLoop.ms) / vmMibs),
      row('egress', `${MIB} MiB by a host process through the gateway (CONNECT, as HTTPS), MiB/s`, mibs(hostTunnelMs).toFixed(1), `${hostMibs.toFixed(1)} host straight`, mibs(hostTunnelMs) / hostMibs, '≥ 50% of the host', mibs(hostTunnelMs) / hostMibs >= 0.5),
      row('egress', `${MIB} MiB by a host process through the gateway (plain HTTP, proxied), MiB/s`, mibs(hostGatewayMs).toFixed(1), `${hostMibs.toFixed(1)} host straight`, mibs(hostGatewayMs) / hostMibs),
    ]);
    relay.close(); // left listening, it kept the process from ending after its report
    await fetch(`${base}/v1/api/vms/${vmId}`, { method: 'DELETE', headers: h });
    await server.host.reconciler!.settled();
  } finally {
    await close();
    await site.close();
  }
}
