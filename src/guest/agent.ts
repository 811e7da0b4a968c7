/**
 * The guest agent: one resident process inside every VM (PID 1 is a Perl loop in init.sh that reaps orphans).
 * It answers the host on the virtio-serial port named AGENT_PORT_NAME (agentPort.ts). The assume
 * program it starts (assume.pl, on a port of its own) makes the bare boot a particular VM: identity,
 * root layer, persist disk; the agent learns of it from ASSUMED_FILE.
 * Only Node built-ins here: this file is bundled alone into the guest image.
 */
import { asImageAsks } from './imageConfig.ts';
import { execFile, spawn } from 'node:child_process';
import { promises as fsp, constants as fsConstants, readFileSync, statfsSync, statSync, type StatsFs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { scrubTree } from './scrub.ts';
import { ASSUME_PERL } from './assume.ts';
import { GuestRuns } from './runs.ts';
import { openShell } from './shell.ts';
import { attachProcess, listProcesses, openProcess, type ProcessAttachArgs } from './process.ts';
import { readFile as readVmFile, writeFile as writeVmFile } from './files.ts';
import { dataPort, dataSync, findPort, rawSink, rawSinkDone, rawSource } from './dataPort.ts';
import { egressAttach, egressRefuse, startEgressListener, type EgressAttachArgs } from './egress.ts';
import { listPorts, portConnect, type PortConnectArgs } from './ports.ts';
import { AgentPort } from './agentPort.ts';
import { exec } from './exec.ts';
import {
  AGENT_PORT_NAME,
  AGENT_PROTOCOL_VERSION,
  GUEST_AWK,
  HARNESS_HOME,
  HARNESS_PROGRAMS,
  HARNESS_USER,
  SECRETS_FILE,
  WORKSPACE,
  type RunAckArgs,
  type RunStartArgs,
  type SecretsArgs,
  PERSIST_MOUNT,
  ASSUMED_FILE,
  STATIC_FACTS_FILE,
  factsFromAssumed,
  parseKeyValues,
  type AgentRequest,
  type ExecArgs,
  type HelloFacts,
  type ShellOpenArgs,
  type FileReadArgs,
  type FileWriteArgs,
} from '../wire/protocol.ts';

const run = promisify(execFile);

function log(msg: string): void {
  process.stderr.write(`agentvm-agent: ${msg}\n`);
}

let persist: HelloFacts['persist'] = { path: PERSIST_MOUNT, device: null, mounted: false, formatted_now: false };
/** What the assume program left (ASSUMED_FILE) once the guest is a particular VM. */
let assumed: Record<string, string> | null = null;

/** The assume program (assume.pl), started with the agent; it takes its line from its own port. */
function startAssumer(): void {
  const child = spawn('perl', ['-e', ASSUME_PERL], { stdio: ['ignore', 'ignore', 'inherit'] });
  child.on('error', (err) => log(`assume program: ${err.message}`));
  child.on('exit', (code) => code && log(`assume program exited with ${code}`));
}

/** When ASSUMED_FILE was last read: a standby's assume program writes it again as it becomes its VM. */
let assumedMtime = 0;

/**
 * Read synchronously, as are the secrets: both are small files (tmpfs, and the persist disk's page
 * cache). Under emulation the thread-pool round trips of an asynchronous stat and read of this file
 * took a standby's first run after it became a VM 15–40 ms of guest time (timed in the agent); the
 * first run's answer came 83–135 ms after its request with these reads, 116–225 ms without.
 */
function readAssumed(): void {
  const st = statSync(ASSUMED_FILE, { throwIfNoEntry: false });
  if (!st || st.mtimeMs === assumedMtime) return;
  let text: string;
  try {
    text = readFileSync(ASSUMED_FILE, 'utf8');
  } catch {
    return;
  }
  if (!text) return;
  assumedMtime = st.mtimeMs;
  assumed = parseKeyValues(text);
  persist = factsFromAssumed(assumed).persist;
}

/** The facts of the image this agent starts in, for the assume program to hand the host. */
async function writeStaticFacts(): Promise<void> {
  const facts = await hello();
  const lines = { protocol: facts.protocol, kernel: facts.kernel, node: facts.node, harnesses: facts.harnesses.join(',') };
  await fsp.mkdir(path.dirname(STATIC_FACTS_FILE), { recursive: true });
  await fsp.writeFile(STATIC_FACTS_FILE, Object.entries(lines).map(([k, v]) => `${k}=${v}\n`).join(''));
}

function readSecrets(): Record<string, string> {
  try {
    return JSON.parse(readFileSync(SECRETS_FILE, 'utf8')) as Record<string, string>;
  } catch {
    return {};
  }
}

/** Sets and removes secrets; the file is replaced whole (write, fsync, rename), mode 0600. */
async function setSecrets(args: SecretsArgs): Promise<{ names: string[] }> {
  readAssumed();
  if (!persist.mounted) throw new Error('the persist disk is not mounted');
  const secrets = readSecrets();
  for (const [name, value] of Object.entries(args?.set ?? {})) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Error(`bad variable name ${name}`);
    if (value === null) delete secrets[name];
    else secrets[name] = String(value);
  }
  const tmp = `${SECRETS_FILE}.tmp`;
  const fh = await fsp.open(tmp, 'w', 0o600);
  try {
    await fh.writeFile(JSON.stringify(secrets));
    await fh.sync();
  } finally {
    await fh.close();
  }
  await fsp.chmod(tmp, 0o600);
  await fsp.rename(tmp, SECRETS_FILE);
  return { names: Object.keys(secrets).sort() };
}

/** How a harness task runs: the harness user, the workspace, a plain environment plus the VM's secrets. */
async function harnessSpawning(extraEnv: Record<string, string> | undefined) {
  readAssumed();
  if (!persist.mounted) throw new Error('the persist disk is not mounted');
  const env: Record<string, string> = {
    PATH: '/usr/local/bin:/usr/bin:/bin',
    HOME: HARNESS_HOME,
    USER: HARNESS_USER.name,
    LOGNAME: HARNESS_USER.name,
    LANG: 'C.UTF-8',
    TERM: 'dumb',
    CI: '1',
  };
  return asImageAsks({ cwd: WORKSPACE, env, uid: HARNESS_USER.uid, gid: HARNESS_USER.gid }, { ...(extraEnv ?? {}), ...readSecrets() });
}

const agentPort = new AgentPort(log);
const runs = new GuestRuns(agentPort.send, log);

/** A shell's environment beyond its terminal's: the host's variables (proxy, brokered placeholders) and the VM's secrets, as a run's. */
async function shellEnvironment(hostEnv: Record<string, string> | undefined): Promise<Record<string, string>> {
  readAssumed();
  if (!persist.mounted) throw new Error('the persist disk is not mounted');
  return { ...(hostEnv ?? {}), ...readSecrets() };
}

/** The harness programs are the image's: looked for once, when the agent starts. */
let harnesses: Promise<string[]> | null = null;
let bootId: Promise<string> | null = null;

async function installedHarnesses(): Promise<string[]> {
  const found: string[] = [];
  for (const [id, program] of Object.entries(HARNESS_PROGRAMS)) {
    for (const dir of ['/usr/local/bin', '/usr/bin']) {
      if (await fsp.access(path.join(dir, program), fsConstants.X_OK).then(() => true, () => false)) {
        found.push(id);
        break;
      }
    }
  }
  return found;
}

function ipv4(): string | null {
  // No network card: the guest's address is an alias of its loopback, named by its identity.
  if (assumed?.ipv4) return assumed.ipv4;
  for (const [name, addrs] of Object.entries(os.networkInterfaces())) {
    if (name === 'lo') continue;
    const a = addrs?.find((x) => x.family === 'IPv4' && !x.internal);
    if (a) return a.address;
  }
  return null;
}

async function hello(): Promise<HelloFacts> {
  readAssumed();
  return {
    protocol: AGENT_PROTOCOL_VERSION,
    hostname: os.hostname(),
    kernel: os.release(),
    node: process.version,
    // Read only once the guest is a VM: the kernel makes it at its first read, and one read before a
    // golden snapshot would give every VM cloned from it the same. The assume program reads it first
    // and again at each identity (a branch's VM gets a new one): its answer is the current one.
    boot_id: assumed ? assumed.boot_id || (await (bootId ??= fsp.readFile('/proc/sys/kernel/random/boot_id', 'utf8').then((s) => s.trim(), () => ''))) : '',
    uptime_s: os.uptime(),
    ipv4: ipv4(),
    persist,
    harnesses: await (harnesses ??= installedHarnesses()),
    assumed: assumed !== null,
    instance_id: assumed?.instance_id ?? null,
  };
}

async function handle(req: AgentRequest): Promise<unknown> {
  switch (req.op) {
    case 'hello':
      return hello();
    case 'warm':
      // A golden VM, before its snapshot. V8 compiles a function when it is first called, and under
      // emulation that costs a clone tens of milliseconds a function: call what a clone runs first,
      // so the clones resume with it compiled.
      await hello();
      // The echo harness's awk (a 2 MiB static binary) into the page cache: there the clones share it,
      // not each a copy read at its first run (which also made every suspend's saved memory 2 MiB larger).
      try {
        readFileSync(GUEST_AWK);
      } catch {
        // an image without it: nothing to share
      }
      await run('sync', []);
      return { warm: true };
    case 'ping':
      return { pong: true, uptime_s: os.uptime() };
    case 'sync':
      await run('sync', []);
      return { synced: true };
    case 'stats': {
      // The host's metrics sampler, every few seconds: read here, no process started.
      // Synchronous calls, as for the identity: under emulation the answer came in 10 ms, not 18 (the
      // guest's CPU for it, about 19 ms, is its waking up, the same either way).
      readAssumed();
      const meminfo = readFileSync('/proc/meminfo', 'utf8');
      const kib = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(meminfo)?.[1] ?? NaN);
      let fs: StatsFs | null = null;
      try {
        fs = persist.mounted ? statfsSync(PERSIST_MOUNT) : null;
      } catch {
        // not mounted after all: no figure
      }
      return {
        mem_total_kib: kib('MemTotal'),
        mem_available_kib: kib('MemAvailable'),
        disk_used_bytes: fs ? (fs.blocks - fs.bfree) * fs.bsize : null,
      };
    }
    case 'exec':
      return exec(req.args as ExecArgs);
    case 'run_start': {
      const args = req.args as RunStartArgs;
      return runs.start(args, await harnessSpawning(args.env));
    }
    case 'run_sync': {
      const args = req.args as { run_id: string; after: number };
      return runs.sync(args.run_id, args.after);
    }
    case 'run_ack': {
      const args = req.args as RunAckArgs;
      runs.ack(args.run_id, args.seq, args.done === true);
      return { acked: true };
    }
    case 'run_cancel':
      return runs.cancel((req.args as { run_id: string }).run_id);
    case 'secrets':
      return setSecrets(req.args as SecretsArgs);
    case 'shell_open': {
      const args = req.args as ShellOpenArgs;
      const env = await shellEnvironment(args?.env);
      return args?.process ? openProcess(args, env) : openShell(args, env);
    }
    case 'process_list':
      return listProcesses();
    case 'process_attach':
      return attachProcess(req.args as ProcessAttachArgs);
    case 'file_read':
      return readVmFile(req.args as FileReadArgs);
    case 'file_write':
      return writeVmFile(req.args as FileWriteArgs);
    case 'data_sync':
      return dataSync(String((req.args as { token: string })?.token));
    case 'egress_attach':
      return egressAttach(req.args as EgressAttachArgs);
    case 'egress_refuse':
      return egressRefuse(req.args as { conn: number });
    case 'port_connect':
      return portConnect(req.args as PortConnectArgs);
    case 'ports_list':
      return listPorts();
    case 'raw_sink':
      return rawSink(Number((req.args as { bytes: number }).bytes));
    case 'raw_sink_done':
      return rawSinkDone();
    case 'raw_source':
      return rawSource(Number((req.args as { bytes: number }).bytes));
    case 'freeze':
      // A consistent persist disk for a capture: flush, then hold writes until thaw.
      await run('sync', []);
      await run('fsfreeze', ['--freeze', PERSIST_MOUNT]);
      return { frozen: true };
    case 'thaw':
      await run('fsfreeze', ['--unfreeze', PERSIST_MOUNT]).catch(() => undefined);
      return { frozen: false };
    case 'scrub': {
      readAssumed();
      if (!persist.mounted) throw new Error('the persist disk is not mounted');
      const report = await scrubTree(PERSIST_MOUNT);
      await run('sync', []);
      // Freed blocks go back to the image (discard), so nothing removed survives in it.
      await run('fstrim', [PERSIST_MOUNT]);
      return report;
    }
    default:
      throw new Error(`unknown op "${req.op}"`);
  }
}

async function main(): Promise<void> {
  harnesses = installedHarnesses();
  await writeStaticFacts();
  startAssumer();
  void dataPort();
  // The egress gateway's port, carried to the host on the data port (egress.ts): listening from the
  // boot on, so a snapshot's clones have it from their first instant.
  startEgressListener(agentPort.send, log);
  const device = await findPort(AGENT_PORT_NAME);
  log(`ready on ${device}`);
  await agentPort.serve(device, handle);
}

main().catch((err) => {
  log(`fatal: ${(err as Error).stack ?? err}`);
  process.exit(1);
});
