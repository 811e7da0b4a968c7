/**
 * `agentvm vms shell`: this terminal joined to a shell socket. Raw mode while it lasts, the window's
 * size followed with resize frames, `~.` after a newline ends it (as ssh's escape does; `~~` sends a
 * `~`), and the shell's exit status becomes the command's.
 */
import { WebSocket } from 'ws';
import { ClientError } from '../client/client.ts';
import { EXIT, exitCodeForStatus } from './exitCodes.ts';

/** The escape: `~` then `.` at the start of a line. */
export class EscapeReader {
  private lineStart = true;
  private tilde = false;

  /** Splits typed bytes into what goes to the shell and whether the escape was typed. */
  feed(input: Buffer): { send: Buffer; quit: boolean } {
    const out: number[] = [];
    for (const byte of input) {
      if (this.tilde) {
        this.tilde = false;
        if (byte === 0x2e) return { send: Buffer.from(out), quit: true }; // ~.
        if (byte !== 0x7e) out.push(0x7e); // ~~ is one ~; ~x is both
        out.push(byte);
        this.lineStart = byte === 0x0d || byte === 0x0a;
        continue;
      }
      if (byte === 0x7e && this.lineStart) {
        this.tilde = true;
        continue;
      }
      out.push(byte);
      this.lineStart = byte === 0x0d || byte === 0x0a;
    }
    return { send: Buffer.from(out), quit: false };
  }
}

/** Opens the socket; a refusal comes back as the API's error. */
export function connectShell(url: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c));
      res.on('end', () => {
        let body: { error?: string; message?: string; hint?: string } = {};
        try {
          body = JSON.parse(text);
        } catch {
          // not ours
        }
        reject(new ClientError(body.error ?? `http_${res.statusCode}`, body.message ?? '', body.hint, res.statusCode));
      });
    });
    ws.once('error', (err) => reject(new ClientError('unreachable', `cannot open the shell socket (${err.message})`)));
  });
}

/** The command's exit code for how the socket closed, and what to say about it. */
export function closeOutcome(code: number, reason: string): { exit: number; say?: string } {
  if (code === 1000) {
    const exit = /^exit (\d+)$/.exec(reason);
    if (exit) return { exit: Number(exit[1]) };
    const signal = /^signal (\w+)$/.exec(reason);
    if (signal) return { exit: 128 + (({ SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 }) as Record<string, number>)[signal[1]] || 129, say: `the shell was killed by ${signal[1]}` };
    return { exit: 0 };
  }
  if (code === 4409) return { exit: exitCodeForStatus(409), say: reason || 'the VM stopped' };
  return { exit: EXIT.unreachable, say: reason || `the shell socket closed (${code})` };
}

/** Joins stdin/stdout to the socket until the shell ends or the escape is typed; answers the exit code. */
export function runTerminal(ws: WebSocket): Promise<number> {
  const stdin = process.stdin;
  const stdout = process.stdout;
  const raw = stdin.isTTY === true;
  const escape = new EscapeReader();
  if (raw) stdin.setRawMode(true);
  const sendSize = () => {
    if (stdout.columns && stdout.rows && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'resize', cols: stdout.columns, rows: stdout.rows }));
  };
  stdout.on('resize', sendSize);
  ws.on('message', (data, isBinary) => {
    if (isBinary) stdout.write(data as Buffer);
  });
  const onInput = (chunk: Buffer) => {
    if (!raw) return void ws.send(chunk, { binary: true });
    const { send, quit } = escape.feed(chunk);
    if (send.length) ws.send(send, { binary: true });
    if (quit) ws.close(1000, 'closed by the user');
  };
  stdin.on('data', onInput);
  // Piped input: its end is the shell's end of input (Ctrl-D at the prompt).
  stdin.on('end', () => ws.readyState === WebSocket.OPEN && ws.send(Buffer.from([4]), { binary: true }));
  stdin.resume();
  return new Promise((resolve) => {
    ws.on('close', (code, reasonBuf) => {
      if (raw) stdin.setRawMode(false);
      stdin.off('data', onInput);
      stdin.pause();
      stdout.off('resize', sendSize);
      const { exit, say } = closeOutcome(code, reasonBuf.toString('utf8'));
      if (say) process.stderr.write(`\r\nagentvm: ${say}\r\n`);
      resolve(exit);
    });
    ws.on('error', () => undefined);
  });
}
