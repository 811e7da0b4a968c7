/**
 * What a VM's image asks of the processes it runs (its Dockerfile's ENV, WORKDIR and USER), read from
 * the image's root (IMAGE_CONFIG_PATH); a VM of the base image has none and keeps the platform's user,
 * home and workspace. Only Node built-ins here: this file is bundled into the guest image.
 */
import { readFileSync } from 'node:fs';
import { HARNESS_USER, IMAGE_CONFIG_PATH, type ImageConfig } from '../wire/protocol.ts';

/** The user, directory and environment of a run or shell, before the image's say. */
export interface ProcessBase {
  cwd: string;
  uid: number;
  gid: number;
  env: Record<string, string>;
}

type ImageConfigFile = Partial<ImageConfig>;

function readConfig(): ImageConfigFile | null {
  try {
    const v = JSON.parse(readFileSync(IMAGE_CONFIG_PATH, 'utf8')) as unknown;
    return v && typeof v === 'object' ? (v as ImageConfigFile) : null;
  } catch {
    return null;
  }
}

/** `name`, `uid`, `name:group` or `uid:gid` as numbers and a name, from the root's passwd and group files. */
function lookupUser(spec: string): { uid: number; gid: number; name: string; home: string } | null {
  const [user, group] = spec.split(':');
  const table = (file: string) =>
    (() => {
      try {
        return readFileSync(file, 'utf8');
      } catch {
        return '';
      }
    })()
      .split('\n')
      .map((l) => l.split(':'));
  const pw = table('/etc/passwd').find((f) => f[0] === user || f[2] === user);
  if (!pw && !/^\d+$/.test(user)) return null;
  const uid = pw ? Number(pw[2]) : Number(user);
  let gid = pw ? Number(pw[3]) : uid;
  if (group) {
    const gr = table('/etc/group').find((f) => f[0] === group || f[2] === group);
    if (!gr && !/^\d+$/.test(group)) return null;
    gid = gr ? Number(gr[2]) : Number(group);
  }
  return { uid, gid, name: pw?.[0] ?? user, home: pw?.[5] || '/' };
}

/**
 * A process's start as the image asks: the platform's environment, the image's ENV over it, then
 * `extra` (the run's own variables and the VM's secrets) over both; its WORKDIR and USER when set.
 */
export function asImageAsks(base: ProcessBase, extra: Record<string, string> = {}): ProcessBase {
  const c = readConfig();
  const out: ProcessBase = { ...base, env: { ...base.env, ...(c?.env ?? {}) } };
  if (c?.workdir) out.cwd = c.workdir;
  if (c?.user && c.user !== HARNESS_USER.name) {
    const u = lookupUser(c.user);
    if (u) {
      out.uid = u.uid;
      out.gid = u.gid;
      out.env = { ...out.env, USER: u.name, LOGNAME: u.name, HOME: c.env?.HOME ?? u.home };
    }
  }
  out.env = { ...out.env, ...extra };
  return out;
}
