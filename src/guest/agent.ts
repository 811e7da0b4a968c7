/**
 * The guest agent: one resident process inside every VM (PID 1 is tini, which reaps orphans).
 * It mounts the persist disk, then answers the host on the virtio-serial port named AGENT_PORT_NAME.
 * Only Node built-ins here: this file is bundled alone into the guest image.
 */
import { execFile, spawn } from 'node:child_process';
import { promises as fsp, openSync, read, write } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import {
  AGENT_PORT_NAME,
  AGENT_PROTOCOL_VERSION,
  PERSIST_MOUNT,
  PERSIST_SERIAL,
  type AgentRequest,
  type AgentResponse,
  type ExecArgs,
  type ExecResult,
  type HelloFacts,
} from './protocol.ts';

const run = promisify(execFile);
const EXT_MAGIC_OFFSET = 1080;

function log(msg: string): void {
  process.stderr.write(`agentvm-agent: ${msg}\n`);
}

/** The /dev node of the block device whose virtio serial is `serial`. */
async function blockDeviceBySerial(serial: string): Promise<string | null> {
  for (const name of await fsp.readdir('/sys/block').catch(() => [] as string[])) {
    const s = await fsp.readFile(`/sys/block/${name}/serial`, 'utf8').catch(() => '');
    if (s.trim() === serial) return `/dev/${name}`;
  }
  return null;
}

async function hasExtFilesystem(device: string): Promise<boolean> {
  const fh = await fsp.open(device, 'r');
  try {
    const buf = Buffer.alloc(2);
    await fh.read(buf, 0, 2, EXT_MAGIC_OFFSET);
    return buf.readUInt16LE(0) === 0xef53;
  } finally {
    await fh.close();
  }
}

let persist: HelloFacts['persist'] = { path: PERSIST_MOUNT, device: null, mounted: false, formatted_now: false };

async function mountPersist(): Promise<void> {
  const device = await blockDeviceBySerial(PERSIST_SERIAL);
  persist = { path: PERSIST_MOUNT, device, mounted: false, formatted_now: false };
  if (!device) {
    persist.error = 'no persist disk attached';
    return;
  }
  try {
    if (!(await hasExtFilesystem(device))) {
      await run('mkfs.ext4', ['-q', '-F', '-L', 'persist', '-E', 'lazy_itable_init=1,lazy_journal_init=1', device]);
      persist.formatted_now = true;
    }
    await fsp.mkdir(PERSIST_MOUNT, { recursive: true });
    await run('mount', ['-t', 'ext4', '-o', 'noatime', device, PERSIST_MOUNT]);
    persist.mounted = true;
  } catch (err) {
    persist.error = (err as Error).message;
    log(`persist disk: ${persist.error}`);
  }
}

function ipv4(): string | null {
  for (const [name, addrs] of Object.entries(os.networkInterfaces())) {
    if (name === 'lo') continue;
    const a = addrs?.find((x) => x.family === 'IPv4' && !x.internal);
    if (a) return a.address;
  }
  return null;
}

async function hello(): Promise<HelloFacts> {
  return {
    protocol: AGENT_PROTOCOL_VERSION,
    hostname: os.hostname(),
    kernel: os.release(),
    node: process.version,
    boot_id: (await fsp.readFile('/proc/sys/kernel/random/boot_id', 'utf8').catch(() => '')).trim(),
    uptime_s: os.uptime(),
    ipv4: ipv4(),
    persist,
  };
}

/** Runs argv directly (never through a shell) in its own process group, with a deadline and capped output. */
function exec(args: ExecArgs): Promise<ExecResult> {
  if (!Array.isArray(args.argv) || args.argv.length === 0 || !args.argv.every((a) => typeof a === 'string')) {
    return Promise.reject(new Error('argv must be a non-empty array of strings'));
  }
  const max = args.max_output_bytes ?? 4 * 1024 * 1024;
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(args.argv[0], args.argv.slice(1), {
      cwd: args.cwd ?? '/',
      env: args.env ?? { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: '/root' },
      uid: args.uid,
      gid: args.gid,
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const streams = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
    const kept = { stdout: 0, stderr: 0 };
    const dropped = { stdout: 0, stderr: 0 };
    for (const name of ['stdout', 'stderr'] as const) {
      child[name].on('data', (chunk: Buffer) => {
        const room = max - kept[name];
        if (room > 0) {
          const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
          streams[name].push(part);
          kept[name] += part.length;
        }
        dropped[name] += Math.max(0, chunk.length - Math.max(room, 0));
      });
    }
    let timedOut = false;
    const killGroup = () => {
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // the group is gone already
      }
    };
    const timer = args.timeout_ms ? setTimeout(() => ((timedOut = true), killGroup()), args.timeout_ms) : undefined;
    child.stdin.on('error', () => undefined);
    child.stdin.end(args.stdin ?? '');
    const finish = (code: number | null, signal: string | null) => {
      clearTimeout(timer);
      killGroup(); // nothing the task started outlives it
      resolve({
        exit_code: code,
        signal,
        stdout: Buffer.concat(streams.stdout).toString('utf8'),
        stderr: Buffer.concat(streams.stderr).toString('utf8'),
        stdout_truncated_bytes: dropped.stdout,
        stderr_truncated_bytes: dropped.stderr,
        timed_out: timedOut,
        duration_ms: Date.now() - started,
      });
    };
    child.on('error', (err) => {
      streams.stderr.push(Buffer.from(`${err.message}\n`));
      finish(127, null);
    });
    child.on('close', (code, signal) => finish(code, signal));
  });
}

async function handle(req: AgentRequest): Promise<unknown> {
  switch (req.op) {
    case 'hello':
      return hello();
    case 'ping':
      return { pong: true, uptime_s: os.uptime() };
    case 'sync':
      await run('sync', []);
      return { synced: true };
    case 'exec':
      return exec(req.args as ExecArgs);
    default:
      throw new Error(`unknown op "${req.op}"`);
  }
}

async function findPort(): Promise<string> {
  for (;;) {
    for (const entry of await fsp.readdir('/sys/class/virtio-ports').catch(() => [] as string[])) {
      const name = await fsp.readFile(`/sys/class/virtio-ports/${entry}/name`, 'utf8').catch(() => '');
      if (name.trim() === AGENT_PORT_NAME) return path.join('/dev', entry);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Serves the port forever on one descriptor. A virtio port is opened once (a second open is EBUSY);
 * while no host is connected, reads return 0 bytes, so the loop waits a little and reads again.
 */
function serve(device: string): Promise<never> {
  const fd = openSync(device, 'r+');
  const send = (msg: AgentResponse) => write(fd, `${JSON.stringify(msg)}\n`, () => undefined);
  const buf = Buffer.alloc(64 * 1024);
  let buffered = '';
  let idle = 0;
  const onLine = (line: string) => {
    let req: AgentRequest;
    try {
      req = JSON.parse(line) as AgentRequest;
    } catch {
      return;
    }
    if (typeof req?.id !== 'number') return;
    handle(req).then(
      (result) => send({ id: req.id, ok: true, result }),
      (err: Error) => send({ id: req.id, ok: false, error: err.message }),
    );
  };
  return new Promise((_, reject) => {
    const readMore = () =>
      read(fd, buf, 0, buf.length, null, (err, n) => {
        if (err && err.code !== 'EAGAIN') return reject(err);
        if (!n) {
          // No host on the other end: look again soon, then less often (an idle guest stays idle).
          idle = Math.min(idle ? idle * 2 : 25, 1000);
          return setTimeout(readMore, idle);
        }
        idle = 0;
        buffered += buf.toString('utf8', 0, n);
        let nl: number;
        while ((nl = buffered.indexOf('\n')) >= 0) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          if (line.trim()) onLine(line);
        }
        readMore();
      });
    readMore();
  });
}

async function main(): Promise<void> {
  await mountPersist();
  const device = await findPort();
  log(`ready on ${device}; persist ${persist.mounted ? 'mounted' : 'not mounted'} at ${PERSIST_MOUNT}`);
  await serve(device);
}

main().catch((err) => {
  log(`fatal: ${(err as Error).stack ?? err}`);
  process.exit(1);
});
