/** A throwaway PostgreSQL server for a benchmark: its own data dir, a loopback port, fsync off. */
import { execFileSync } from 'node:child_process';
import { chownSync, readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

export const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });

export async function startPostgres(): Promise<{ url: string; dir: string; stop: () => Promise<void> }> {
  const pgBin = path.join('/usr/lib/postgresql', readdirSync('/usr/lib/postgresql').sort((a, b) => Number(a) - Number(b)).at(-1)!, 'bin');
  const dir = await mkdtemp(path.join(tmpdir(), 'agentvm-benchpg-'));
  // As root, the server runs as the postgres user (it refuses root).
  const asPg = process.getuid?.() === 0 ? ['runuser', '-u', 'postgres', '--'] : [];
  const pgRun = (tool: string, args: string[]) =>
    execFileSync(asPg[0] ?? path.join(pgBin, tool), [...asPg.slice(1), ...(asPg.length ? [path.join(pgBin, tool)] : []), ...args], { stdio: 'ignore' });
  if (asPg.length) chownSync(dir, Number(execFileSync('id', ['-u', 'postgres']).toString()), Number(execFileSync('id', ['-g', 'postgres']).toString()));
  const port = await freePort();
  pgRun('initdb', ['-D', `${dir}/data`, '-U', 'postgres', '--auth=trust', '-E', 'UTF8']);
  pgRun('pg_ctl', ['-D', `${dir}/data`, '-l', `${dir}/log`, '-w', '-o', `-c listen_addresses=127.0.0.1 -c port=${port} -c unix_socket_directories=${dir} -c fsync=off`, 'start']);
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    dir,
    stop: async () => {
      try {
        pgRun('pg_ctl', ['-D', `${dir}/data`, '-m', 'immediate', 'stop']);
      } catch {
        // not running
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
