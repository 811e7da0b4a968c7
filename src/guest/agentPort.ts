/**
 * The agent port (AGENT_PORT_NAME): read for requests (JSON lines) and written with answers and
 * events, one whole line after another. Node built-ins only (the guest agent is bundled alone).
 */
import { openSync, read, write } from 'node:fs';
import type { AgentRequest, AgentResponse } from '../wire/protocol.ts';

/**
 * Everything the agent sends goes out one line after another, each whole: writes to the port from
 * Node's thread pool could otherwise overtake one another or stop part way.
 */
export class AgentPort {
  private port: number | null = null;
  private readonly outbox: Buffer[] = [];
  private writing = false;

  constructor(private readonly log: (msg: string) => void) {}

  /** A line to the host; dropped while the port is not open yet. */
  readonly send = (msg: object): void => {
    if (this.port === null) return;
    this.outbox.push(Buffer.from(`${JSON.stringify(msg)}\n`));
    if (!this.writing) this.pump();
  };

  private pump(): void {
    const buf = this.outbox.shift();
    if (!buf || this.port === null) {
      this.writing = false;
      return;
    }
    this.writing = true;
    const fd = this.port;
    const writeFrom = (offset: number) =>
      write(fd, buf, offset, buf.length - offset, null, (err, n) => {
        if (err?.code === 'EAGAIN') return setTimeout(() => writeFrom(offset), 10);
        if (err) this.log(`writing to the port: ${err.message}`);
        else if (offset + n < buf.length) return writeFrom(offset + n);
        this.pump();
      });
    writeFrom(0);
  }

  /**
   * Serves the port forever on one descriptor. A virtio port is opened once (a second open is EBUSY);
   * while no host is connected, reads return 0 bytes, so the loop waits a little and reads again.
   */
  serve(device: string, handle: (req: AgentRequest) => Promise<unknown>): Promise<never> {
    const fd = openSync(device, 'r+');
    this.port = fd;
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
        (result) => this.send({ id: req.id, ok: true, result } satisfies AgentResponse),
        (err: Error) => this.send({ id: req.id, ok: false, error: err.message } satisfies AgentResponse),
      );
    };
    return new Promise((_, reject) => {
      const readMore = () =>
        read(fd, buf, 0, buf.length, null, (err, n) => {
          if (err && err.code !== 'EAGAIN') return reject(err);
          if (!n) {
            // No host on the other end: look again soon, then less often (an idle guest stays idle).
            idle = Math.min(idle ? idle * 2 : 10, 250);
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
}
