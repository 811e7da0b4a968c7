/**
 * The bridge between a WebSocket and a guest's terminal: the API's shell socket (api/shellSocket.ts)
 * and the VM host's internal one (host/internalShell.ts) both join their sockets with it.
 */
import { WebSocket, type RawData } from 'ws';
import type { GuestShell, ShellEnd } from '../domain/guestAccess.ts';

/** Close codes of a shell socket. */
export const SHELL_CLOSE = { exited: 1000, serverStopping: 1001, internal: 1011, vmStopped: 4409 } as const;

/** Bytes a client may have sent that the guest has not taken yet before the socket stops reading. */
const INPUT_WINDOW = 1024 * 1024;

const toBuffer = (data: RawData): Buffer => (Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data));

/**
 * Joins a socket and a guest's terminal until either ends: keystrokes in (the socket stops reading
 * while the guest is behind), output out (the guest is granted more as the socket takes it), resize
 * frames, and the shell's end as the socket's close (`closeWith` words it).
 */
export function bridgeShell(ws: WebSocket, shell: GuestShell, closeWith: (end: ShellEnd) => { code: number; reason: string }): void {
  let pending = 0;
  let paused = false;
  ws.on('message', (data, isBinary) => {
    if (!isBinary) {
      try {
        const msg = JSON.parse(toBuffer(data).toString('utf8')) as { type?: unknown; cols?: unknown; rows?: unknown };
        const ok = (v: unknown) => Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 1000;
        if (msg.type === 'resize' && ok(msg.cols) && ok(msg.rows)) shell.resize(msg.cols as number, msg.rows as number);
      } catch {
        // not a message of ours: ignored, as a terminal ignores what it does not know
      }
      return;
    }
    const bytes = toBuffer(data);
    pending += bytes.length;
    if (pending > INPUT_WINDOW && !paused) {
      paused = true;
      ws.pause();
    }
    shell.write(bytes).then(
      () => {
        pending -= bytes.length;
        if (paused && pending < INPUT_WINDOW / 4) {
          paused = false;
          ws.resume();
        }
      },
      () => undefined,
    );
  });
  shell.output((chunk, done) => {
    if (ws.readyState !== WebSocket.OPEN) return done();
    ws.send(chunk, { binary: true }, () => done());
  });
  ws.on('error', () => undefined);
  ws.on('close', () => shell.close());
  void shell.ended.then((end) => {
    const { code, reason: why } = closeWith(end);
    if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) ws.close(code, why);
  });
}

export interface ShellSockets {
  /** Closes every open shell socket (the server stops). */
  close(): void;
}
