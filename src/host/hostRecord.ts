/**
 * This machine's record among the VM hosts: its id (kept in the data dir, so a restart is the same
 * host), the capacity it registers, and its draining flag, set from the command line.
 */
import { readFile, statfs, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Config } from '../config.ts';
import { newId } from '../domain/ids.ts';
import * as hostStore from '../store/hosts.ts';

/** This data dir's host id, made at its first run. */
export async function readHostId(dataDir: string): Promise<string> {
  const file = path.join(dataDir, 'host-id');
  const saved = (await readFile(file, 'utf8').catch(() => '')).trim();
  if (saved) return saved;
  const id = newId('host');
  await writeFile(file, `${id}\n`);
  return id;
}

/**
 * What this host offers. Defaults: 4 vCPUs per core (agents mostly wait), the machine's memory less
 * 1 GiB for itself, and 4× the data dir's free space in disk (persist disks are sparse).
 */
export async function capacity(config: Config) {
  const fs = await statfs(config.dataDir);
  const freeGib = Math.floor((fs.bavail * fs.bsize) / 2 ** 30);
  return {
    vcpus_total: config.hostVcpus ?? os.cpus().length * 4,
    memory_mib_total: config.hostMemoryMib ?? Math.max(1024, Math.floor(os.totalmem() / 2 ** 20) - 1024),
    disk_gib_total: config.hostDiskGib ?? freeGib * 4,
  };
}

/** Marks this data dir's host as draining (or not): placement skips it; its VMs stay. Needs DATABASE_URL. */
export async function drainHost(config: Config, draining: boolean): Promise<string> {
  if (!config.databaseUrl) throw new Error('draining a host needs DATABASE_URL (the PostgreSQL server the hosts share)');
  const id = (await readFile(path.join(config.dataDir, 'host-id'), 'utf8').catch(() => '')).trim();
  if (!id) throw new Error(`no host has run with the data dir ${config.dataDir}`);
  const { openDb } = await import('../store/db.ts');
  const db = await openDb({ databaseUrl: config.databaseUrl });
  try {
    if (!(await hostStore.setDraining(db, id, draining))) throw new Error(`host ${id} is not registered in this database`);
  } finally {
    await db.close();
  }
  return id;
}
