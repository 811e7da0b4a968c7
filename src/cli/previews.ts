/**
 * The CLI's preview commands beyond `vms ports`: `vms url VM PORT` (the preview URL with a new preview
 * token in it: a link that works in a browser, where the server trades the token for a cookie of that
 * host), `vms open VM PORT` (that link in the browser), and `vms forward VM PORT [--local N]` (a local
 * port whose every connection goes to the port in the VM over a WebSocket, any TCP protocol, as `fly proxy`).
 */
import { spawn } from 'node:child_process';
import net from 'node:net';
import { Command, Option } from 'commander';
import { createWebSocketStream, WebSocket } from 'ws';
import { call, ClientError, resolveCredentials } from '../client/client.ts';
import { portSocketPath, portUrl } from '../client/previews.ts';
import { joinStreams } from '../domain/previewAccess.ts';
import { apiAction, customerClient } from './apiAction.ts';
import { print, type Out } from './output.ts';

const jsonOpt = () => new Option('--json', 'print JSON (for scripts)');

function portNumber(text: string, name = 'port'): number {
  if (!/^\d{1,5}$/.test(text) || Number(text) > 65535) throw new ClientError('invalid_request', `${name}: a TCP port number`);
  return Number(text);
}

export function vmsUrl(cmd: Command): void {
  cmd
    .description("a port's preview URL with a new preview token in it (the VM's earlier token stops working); a public port's bare URL, no new token")
    .argument('<vm_id>')
    .argument('<port>')
    .addOption(jsonOpt())
    .addHelpText('after', '\nExample:\n  agentvm vms url vm_… 3000')
    .action(apiAction(async (id: string, portText: string, o: Out) => {
      const r = await portUrl(await customerClient(), id, portNumber(portText));
      print(r, o, () => process.stdout.write(`${r.url}\n`));
    }));
}

/** The browser opener: $BROWSER when set, else the system's. */
function opener(url: string): [string, string[]] {
  if (process.env.BROWSER) return [process.env.BROWSER, [url]];
  if (process.platform === 'darwin') return ['open', [url]];
  if (process.platform === 'win32') return ['cmd', ['/c', 'start', '""', url.replace(/&/g, '^&')]];
  return ['xdg-open', [url]];
}

export function vmsOpen(cmd: Command): void {
  cmd
    .description("open a port's preview in the browser: its URL with a new preview token, as `vms url` (the VM's earlier token stops working)")
    .argument('<vm_id>')
    .argument('<port>')
    .addHelpText('after', '\nThe browser is $BROWSER when set, else the system\'s (xdg-open, open). The link is printed too.\n\nExample:\n  agentvm vms open vm_… 3000')
    .action(apiAction(async (id: string, portText: string) => {
      const r = await portUrl(await customerClient(), id, portNumber(portText));
      process.stdout.write(`${r.url}\n`);
      const [command, args] = opener(r.url);
      const started = await new Promise<boolean>((resolve) => {
        const child = spawn(command, args, { detached: true, stdio: 'ignore' });
        child.once('error', () => resolve(false));
        child.once('spawn', () => resolve(true));
        child.unref();
      });
      if (!started) process.stderr.write(`no browser could be started (${command}); open the link above\n`);
    }));
}

export interface Forward {
  /** The local port taken. */
  port: number;
  close(): Promise<void>;
}

/**
 * Listens on `bind:local` and joins each connection to a WebSocket of the API's port socket. A refusal
 * (401, 404, 409, 502 port_closed) is reported through `refused` and closes that connection.
 */
export async function forwardPort(o: {
  baseUrl: string;
  key: string;
  vmId: string;
  port: number;
  local: number;
  bind: string;
  refused?: (message: string) => void;
}): Promise<Forward> {
  const url = `${o.baseUrl.replace(/^http/, 'ws')}${portSocketPath(o.vmId, o.port)}`;
  const open = new Set<net.Socket>();
  const server = net.createServer((conn) => {
    open.add(conn);
    conn.once('close', () => open.delete(conn));
    conn.on('error', () => undefined);
    conn.pause();
    const ws = new WebSocket(url, { headers: { authorization: `Bearer ${o.key}` }, perMessageDeflate: false });
    // One report a connection: a refusal, or the failure to reach the API (not the cut that follows either).
    let told = false;
    const refuse = (said: string) => {
      if (!told) o.refused?.(said);
      told = true;
      conn.destroy();
    };
    conn.once('close', () => ws.readyState === WebSocket.OPEN || ((told = true), ws.terminate()));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => {
        let said = `${res.statusCode}`;
        try {
          const e = JSON.parse(body) as { error: string; message: string; hint?: string };
          said = `${e.error}${e.message ? `: ${e.message}` : ''}${e.hint ? ` (${e.hint})` : ''}`;
        } catch {
          // not our Error shape: the status says it
        }
        refuse(said);
      });
    });
    ws.on('error', (err) => (ws.readyState === WebSocket.OPEN ? conn.destroy() : refuse(`unreachable: ${err.message}`)));
    ws.once('open', () => joinStreams(createWebSocketStream(ws), conn));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.local, o.bind, () => resolve());
  });
  server.on('error', () => undefined);
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const c of open) c.destroy();
        server.close(() => resolve());
      }),
  };
}

export function vmsForward(cmd: Command): void {
  cmd
    .description('forward a local port to a port in the VM, over a WebSocket through the API (any TCP protocol), until Ctrl-C')
    .argument('<vm_id>')
    .argument('<port>', 'the port in the VM')
    .option('--local <port>', 'the local port (default: the same number as in the VM; 0: any free one)')
    .option('--bind <address>', 'the local address to listen on', '127.0.0.1')
    .addHelpText(
      'after',
      '\nEach local connection is a connection to the port on the VM\'s loopback, with the same credential rules as its\n' +
        'preview; a suspended VM with auto_resume is woken by the first.\n\nExamples:\n  agentvm vms forward vm_… 5432              # psql -h 127.0.0.1\n  agentvm vms forward vm_… 3000 --local 8000',
    )
    .action(apiAction(async (id: string, portText: string, opts: { local?: string; bind: string }) => {
      const { baseUrl, key } = await resolveCredentials();
      if (!key) throw new ClientError('unauthorized', 'no API key: run `agentvm login`, or set AGENTVM_API_KEY');
      const port = portNumber(portText);
      const local = opts.local === undefined ? port : portNumber(opts.local, '--local');
      // The VM is checked once here, so that a wrong id fails now rather than on the first connection.
      await call((await customerClient()).GET('/v1/api/vms/{id}', { params: { path: { id } } }));
      let fwd: Forward;
      try {
        fwd = await forwardPort({ baseUrl, key, vmId: id, port, local, bind: opts.bind, refused: (m) => process.stderr.write(`connection refused: ${m}\n`) });
      } catch (err) {
        throw new ClientError('invalid_request', `cannot listen on ${opts.bind}:${local}: ${(err as Error).message}`, 'choose another with --local N (0: any free port)');
      }
      process.stderr.write(`forwarding ${opts.bind}:${fwd.port} -> ${id} port ${port} (Ctrl-C to stop)\n`);
      await new Promise<void>((resolve) => {
        process.once('SIGINT', resolve);
        process.once('SIGTERM', resolve);
      });
      await fwd.close();
    }));
}
