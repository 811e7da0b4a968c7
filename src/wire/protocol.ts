/**
 * The host↔guest agent protocol: newline-delimited JSON over one virtio-serial port.
 * The host sends requests with an id; the agent answers each id once. Until the guest has booted
 * nothing answers, so the host repeats `hello` until it gets its first answer.
 * Shared by the host driver and the guest agent; it imports nothing.
 */
export const AGENT_PORT_NAME = 'agentvm.0';
export const PERSIST_MOUNT = '/persist';
/** The read-only base of the root filesystem (virtio-blk, shared by every VM of an image). */
export const ROOT_SERIAL = 'root';
/**
 * The two disks of a VM's own (SCSI disks, found by model): the writable layer of its root filesystem,
 * and its persist disk. A VM resumed from a snapshot gets both after it resumes.
 */
export const UPPER_MODEL = 'agentvm-root';
export const PERSIST_MODEL = 'agentvm-persist';
export const AGENT_PROTOCOL_VERSION = 8;
/**
 * From this protocol on, the assume program stays after its answer, blocked on its port, and sets a
 * resumed VM's clock from a line `sec=… nsec=…` (answered `clock=ok`, `end`); before it, the agent's
 * `set_clock` did.
 */
export const ASSUME_PORT_CLOCK = 6;
/** Where harness runs happen, on the persist disk, owned by the harness user. */
export const WORKSPACE = '/persist/workspace';
/**
 * E2B's user directory: in every image a link to the workspace (so E2B's paths and agentvm's name the
 * same files, on a VM of any start: a restart resets the root to the image's). Relative paths of E2B's
 * API and `~` land here, and a process started with no directory starts here.
 */
export const E2B_HOME = '/home/user';
/** The harness user's home, on the persist disk: logins and tool settings survive restarts. */
export const HARNESS_HOME = '/persist/home';
/** Harness credentials (bring-your-own-key variables): a JSON object, mode 0600, root only. */
export const SECRETS_FILE = '/persist/.agentvm/secrets.json';
export const HARNESS_USER = { name: 'agent', uid: 1000, gid: 1000 };
/** An image's ENV, WORKDIR and USER, written into its root by its build: runs and shells take them. */
export const IMAGE_CONFIG_PATH = '/etc/agentvm/image.json';
/** What IMAGE_CONFIG_PATH holds: what a built image sets for the processes of its VMs (ENV, the last WORKDIR, USER). */
export interface ImageConfig {
  env: Record<string, string>;
  workdir: string;
  user: string;
}
/** The program each harness runs; the guest reports which of them its image has. */
export const HARNESS_PROGRAMS: Record<string, string> = {
  'claude-code': 'claude',
  codex: 'codex',
  'gemini-cli': 'gemini',
  opencode: 'opencode',
  aider: 'aider',
  echo: 'agentvm-echo',
  ticker: 'agentvm-ticker',
};
/**
 * The awk the echo harness and a standby's warm-up run: BusyBox's, statically linked (busybox-static),
 * through a link of this name (BusyBox picks its applet by the name it is called by). Under emulation
 * a dynamically linked program's start (the loader mapping and relocating libc) is most of a short
 * process's cost: an echo run took about 45 ms of the guest's time with it against 80 with mawk.
 */
export const GUEST_AWK = '/usr/local/libexec/agentvm/awk';

export interface AgentRequest {
  id: number;
  op: string;
  args?: unknown;
}

export interface AgentResponse {
  id: number;
  ok: boolean;
  result?: unknown;
  error?: string;
}

export interface HelloFacts {
  protocol: number;
  hostname: string;
  kernel: string;
  node: string;
  boot_id: string;
  uptime_s: number;
  ipv4: string | null;
  persist: { path: string; device: string | null; mounted: boolean; formatted_now: boolean; error?: string };
  /** Ids of the harnesses whose program this guest has. */
  harnesses: string[];
  /** Whether the guest has taken its identity and disks (`assume`); until then it is a bare boot. */
  assumed: boolean;
  /** Names this start of the VM; a VM resumed from a snapshot shares its kernel's boot id with others. */
  instance_id: string | null;
}

/**
 * `assume`: the guest becomes a particular VM. Once per start, for a cold boot and for a clone
 * resumed from a snapshot alike, the host writes one line to the port ASSUME_PORT_NAME, read by the
 * assume program (assume.pl): set the clock, reseed the RNG, take the hostname, machine id and
 * network, mount the root's writable layer over the read-only base and the persist disk. It answers
 * key=value lines and `end` on the port, and leaves the same lines in ASSUMED_FILE for `hello`.
 */
/**
 * The egress gateway as a guest sees it: the only address off the VM (QEMU forwards it to the host's
 * gateway for this VM), by a name the guest's /etc/hosts carries. The HTTP(S) proxy of every program
 * and the base URL of brokered providers (`/providers/<id>/`).
 */
export const EGRESS_GATEWAY_NAME = 'gateway.agentvm.internal';
export const EGRESS_GATEWAY_PORT = 3128;
export const EGRESS_GATEWAY_URL = `http://${EGRESS_GATEWAY_NAME}:${EGRESS_GATEWAY_PORT}`;

export const ASSUME_PORT_NAME = 'agentvm.assume';
export const ASSUMED_FILE = '/run/agentvm/assumed';
/** What the agent knows of its guest when it starts (key=value lines); the assume program passes them on. */
export const STATIC_FACTS_FILE = '/run/agentvm/static';

export interface AssumeArgs {
  instance_id: string;
  hostname: string;
  /** 32 hex digits, stable for the VM. */
  machine_id: string;
  /** The guest's address with its prefix, e.g. 10.128.3.15/24. */
  ipv4: string;
  dns: string;
  /** The egress gateway's address in the guest's network (/etc/hosts names it EGRESS_GATEWAY_NAME). */
  egress: string;
  /** The host's clock, ms since the epoch. */
  time_ms: number;
  /** Fresh randomness from the host, mixed into the guest's pool with credit. */
  entropy_hex: string;
  /** How long to wait for the two disks to appear (a clone's are plugged as it resumes). */
  disk_wait_ms: number;
  /** A standby VM: after this identity (provisional), the program waits for a second line, the VM it becomes. */
  standby?: boolean;
  /** A boot id of its own, for a VM made from a snapshot: its kernel's was read by the VM it was taken of. */
  boot_id?: string;
}

/** The line the host writes to the assume port: space-separated key=value pairs. */
export function assumeLine(args: AssumeArgs): string {
  const sec = Math.floor(args.time_ms / 1000);
  const kv: Record<string, string> = {
    sec: String(sec),
    nsec: String((args.time_ms - sec * 1000) * 1e6),
    entropy: args.entropy_hex,
    hostname: args.hostname,
    ipv4: args.ipv4,
    dns: args.dns,
    egress: args.egress,
    egress_name: EGRESS_GATEWAY_NAME,
    machine_id: args.machine_id,
    instance_id: args.instance_id,
    upper_model: UPPER_MODEL,
    persist_model: PERSIST_MODEL,
    disk_wait_ms: String(args.disk_wait_ms),
    workspace: WORKSPACE,
    home: HARNESS_HOME,
    secrets_dir: SECRETS_FILE.slice(0, SECRETS_FILE.lastIndexOf('/')),
    uid: String(HARNESS_USER.uid),
    gid: String(HARNESS_USER.gid),
    ...(args.standby ? { standby: '1' } : {}),
    ...(args.boot_id ? { boot_id: args.boot_id } : {}),
  };
  const bad = Object.entries(kv).find(([, v]) => !/^[A-Za-z0-9./:_-]+$/.test(v));
  if (bad || !/^[0-9a-f]{32}$/.test(args.machine_id) || !/^[0-9a-f]+$/.test(args.entropy_hex)) {
    throw new Error(`bad assume argument ${bad?.[0] ?? 'machine_id or entropy'}`);
  }
  return `${Object.entries(kv).map(([k, v]) => `${k}=${v}`).join(' ')}\n`;
}

/**
 * The facts of a guest that has taken its identity, from the assume program's answer (its own lines
 * and the agent's static facts): the host has them without a round through the agent.
 */
export function factsFromAssumed(kv: Record<string, string>): HelloFacts {
  return {
    protocol: Number(kv.protocol ?? AGENT_PROTOCOL_VERSION),
    hostname: kv.hostname ?? '',
    kernel: kv.kernel ?? '',
    node: kv.node ?? '',
    boot_id: kv.boot_id ?? '',
    uptime_s: Number(kv.uptime_s ?? 0),
    ipv4: kv.ipv4 || null,
    persist: {
      path: PERSIST_MOUNT,
      device: kv.persist_device || null,
      mounted: kv.persist_mounted === '1',
      formatted_now: kv.persist_formatted === '1',
      ...(kv.persist_error ? { error: kv.persist_error } : {}),
    },
    harnesses: kv.harnesses ? kv.harnesses.split(',') : [],
    assumed: true,
    instance_id: kv.instance_id ?? null,
  };
}

/** key=value lines (the assume program's answer). */
export function parseKeyValues(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) out[line.slice(0, eq)] = line.slice(eq + 1);
  }
  return out;
}

/** `run_start`: one harness task as the harness user in the workspace, with the VM's secrets in its environment. */
export interface RunArgs {
  argv: string[];
  /** Extra non-secret variables the harness needs (provider switches and the like). */
  env?: Record<string, string>;
  timeout_ms: number;
  max_output_bytes: number;
}

/**
 * Runs the guest owns. `run_start` starts one (again: the same run, nothing new) and answers at once;
 * what it prints goes to the host as `run_output` notifications, numbered from 1, and its end as one
 * `run_end`. The guest keeps both until the host acknowledges them (`run_ack`), so a host that was
 * away asks for what it missed (`run_sync`) and nothing is lost. A notification is a line with
 * `event` and no numeric `id`.
 */
export interface RunStartArgs extends RunArgs {
  run_id: string;
}

export type RunStream = 'stdout' | 'stderr';

export interface RunChunk {
  seq: number;
  stream: RunStream;
  text: string;
}

export interface RunOutputEvent extends RunChunk {
  event: 'run_output';
  run_id: string;
}

/** How a run ended, as its guest saw it. */
export interface RunEnd {
  exit_code: number | null;
  signal: string | null;
  timed_out: boolean;
  cancelled: boolean;
  duration_ms: number;
  /** ms from the start to the first byte of output; null when it printed nothing. */
  first_output_ms: number | null;
}

export interface RunEndEvent {
  event: 'run_end';
  run_id: string;
  /** The seq of its last chunk (0: it printed nothing). */
  last_seq: number;
  end: RunEnd;
}

/** `run_sync`: what the guest still has of a run after `after`; `known: false` when it has no such run. */
export interface RunSyncAnswer {
  known: boolean;
  chunks: RunChunk[];
  last_seq: number;
  end: RunEnd | null;
}

/** `run_ack`: the host has stored the run's chunks up to `seq`; `done`: and its end (the guest forgets the run). */
export interface RunAckArgs {
  run_id: string;
  seq: number;
  done?: boolean;
}

/** The line that says what was cut, at the end of a stream that passed its cap. */
export const truncationNote = (bytes: number) => `\n[agentvm: output truncated: ${bytes} more bytes were not kept]\n`;

/** `secrets`: set (string) or remove (null) variables; answers the names now set. */
export interface SecretsArgs {
  set: Record<string, string | null>;
}

export interface ExecArgs {
  argv: string[];
  cwd?: string;
  env?: Record<string, string>;
  /** Run as this uid/gid (an unprivileged user); root when absent. */
  uid?: number;
  gid?: number;
  timeout_ms?: number;
  /** Bytes kept of each stream; what is beyond is counted, not kept. */
  max_output_bytes?: number;
  stdin?: string;
}

export interface ExecResult {
  exit_code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  stdout_truncated_bytes: number;
  stderr_truncated_bytes: number;
  timed_out: boolean;
  duration_ms: number;
}

/**
 * The data port: byte streams (shells, file transfers) as frames (streams.ts), beside the JSON lines
 * of the agent port, so that bulk bytes never wait behind, or hold up, a request.
 */
export const DATA_PORT_NAME = 'agentvm.data';

/** `shell_open`: a login shell as the harness user on a new terminal, its bytes on data stream `stream`. */
export interface ShellOpenArgs {
  stream: number;
  cols: number;
  rows: number;
  /** Variables beyond the terminal's own: the egress proxy and brokered placeholders, as runs have. */
  env: Record<string, string>;
  process?: ProcessOpen; // not a login shell but this program (protocol 7 on; older agents ignore it)
}

/** A program on a stream with pipes, framed as e2b/guestProcess.ts reads it (P/O/E/X out, D/C/K in). */
export interface ProcessOpen {
  argv: string[];
  env: Record<string, string>; // over the shell's environment
  cwd: string | null; // null: /home/user when there is one, else the shell's directory
  root: boolean; // as root, else as the shell's user
  stdin: boolean; // stdin stays open for `D` frames, else it is empty
  meta?: string; // the host's words on it, answered by process_list (protocol 8; at most 16 KiB)
}

/** `file_read`: a directory's entries in the answer, or a file's size in the answer and its bytes on `stream`. */
export interface FileReadArgs {
  stream: number;
  path: string;
  /** The stream's window (frames.ts); STREAM_WINDOW when absent. */
  window?: number;
}

export interface DirEntry {
  name: string;
  type: 'file' | 'dir' | 'link';
  size: number;
  mtime: string;
}

export type FileReadResult = { kind: 'dir'; path: string; entries: DirEntry[] } | { kind: 'file'; path: string; size: number };

/**
 * `file_write`: answered once the file's temporary twin is open; the host then sends the bytes on
 * `stream` and ends it; the guest renames the file into place and ends the stream with `{path, size}`,
 * or aborts it (over `max_bytes`, a cut stream: the temporary file is removed either way).
 */
export interface FileWriteArgs {
  stream: number;
  path: string;
  max_bytes: number;
  /** The stream's window (frames.ts); STREAM_WINDOW when absent. */
  window?: number;
}

/** What a file request can fail with besides the unexpected: its code and message, as the error's text. */
export type GuestFaultCode = 'path' | 'not_found' | 'too_large';

export function encodeFault(code: GuestFaultCode, message: string): string {
  return JSON.stringify({ fault: code, message });
}

export function decodeFault(text: string): { fault: GuestFaultCode; message: string } | null {
  try {
    const v = JSON.parse(text) as { fault?: unknown; message?: unknown };
    return typeof v.fault === 'string' && typeof v.message === 'string' ? (v as { fault: GuestFaultCode; message: string }) : null;
  } catch {
    return null;
  }
}

/** Where files may be read and written: the persist disk, less the platform's own corner of it. */
export const FILES_ROOT = PERSIST_MOUNT;
/** The platform's own corner of the persist disk (the secrets): never the files API's. */
export const RESERVED_ROOT = `${PERSIST_MOUNT}/.agentvm`;
const RESERVED = RESERVED_ROOT;

/** Whether a resolved (real) path is one the files API may touch. */
export function insideFilesRoot(p: string): boolean {
  return (p === FILES_ROOT || p.startsWith(`${FILES_ROOT}/`)) && p !== RESERVED && !p.startsWith(`${RESERVED}/`);
}

/**
 * A customer's path as an absolute path on the persist disk, by its letters alone (the guest then
 * checks where symbolic links lead): relative paths are under the workspace; `..`, NUL and absolute
 * paths elsewhere are refused. Answers the path, or why not.
 */
export function filesPath(p: string): { path: string } | { problem: string } {
  if (typeof p !== 'string' || p.length === 0) return { problem: 'must not be empty' };
  if (p.length > 4096) return { problem: 'must be at most 4096 characters' };
  if (p.includes('\0')) return { problem: 'must not contain NUL' };
  const segments = p.split('/');
  if (segments.includes('..')) return { problem: 'must not contain ".." (paths stay on the persist disk)' };
  const full = p.startsWith('/') ? p : `${WORKSPACE}/${p}`;
  const clean = `/${full.split('/').filter((s) => s !== '' && s !== '.').join('/')}`;
  if (!insideFilesRoot(clean)) {
    return { problem: clean.startsWith(RESERVED) ? `${RESERVED} is the platform's own` : `must be under ${FILES_ROOT} (a relative path is under ${WORKSPACE})` };
  }
  return { path: clean };
}

/** What the agent's `scrub` answers: the credential files a captured disk lost, and the key-shaped strings redacted. */
export interface ScrubReport {
  removed: string[];
  redacted: { path: string; count: number }[];
}
