/**
 * A Dockerfile read into the steps of an image build. Pure: no I/O.
 *
 * One stage: `FROM` names `base` or an image; `RUN`, `COPY` and `ADD` (from the request's files, never
 * a URL), `ENV`, `WORKDIR`, `USER` and `ARG` follow. Anything else is refused naming its line, so a
 * build never silently does less than its Dockerfile says.
 */
import type { ImageConfig } from '../wire/protocol.ts';

export type Step =
  | { line: number; kind: 'run'; argv: string[]; shell: boolean; text: string }
  | { line: number; kind: 'copy'; sources: string[]; dest: string; chown: string | null; chmod: string | null; text: string }
  | { line: number; kind: 'env'; vars: Array<[string, string]>; text: string }
  | { line: number; kind: 'workdir'; path: string; text: string }
  | { line: number; kind: 'user'; user: string; text: string }
  | { line: number; kind: 'arg'; name: string; value: string | null; text: string };

export interface Dockerfile {
  /** `base`, or the image (id or slug) it builds on. */
  from: string;
  steps: Step[];
}

export class DockerfileError extends Error {}

const SUPPORTED = ['FROM', 'RUN', 'COPY', 'ADD', 'ENV', 'WORKDIR', 'USER', 'ARG'];
const KNOWN = [...SUPPORTED, 'CMD', 'ENTRYPOINT', 'EXPOSE', 'VOLUME', 'LABEL', 'HEALTHCHECK', 'SHELL', 'STOPSIGNAL', 'ONBUILD', 'MAINTAINER'];
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
export const MAX_DOCKERFILE_BYTES = 64 * 1024;

/** The instructions of a Dockerfile with their first line numbers: comments gone, continuations joined. */
function instructions(text: string): Array<{ line: number; keyword: string; rest: string }> {
  const out: Array<{ line: number; keyword: string; rest: string }> = [];
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  let pending: { line: number; parts: string[] } | null = null;
  lines.forEach((raw, i) => {
    const trimmed = raw.trim();
    if (trimmed.startsWith('#')) return; // comments (and parser directives) inside a continuation too
    if (!pending && trimmed === '') return;
    const cont = /\\\s*$/.test(raw);
    const piece = cont ? raw.replace(/\\\s*$/, '') : raw;
    if (!pending) pending = { line: i + 1, parts: [] };
    pending.parts.push(piece);
    if (cont) return;
    const joined = pending.parts.join(' ').trim();
    const m = /^(\S+)(?:\s+([\s\S]*))?$/.exec(joined);
    if (m) out.push({ line: pending.line, keyword: m[1].toUpperCase(), rest: (m[2] ?? '').trim() });
    pending = null;
  });
  if (pending) throw new DockerfileError(`line ${(pending as { line: number }).line}: the instruction ends in a line continuation (\\) with nothing after it`);
  return out;
}

/** `$NAME`, `${NAME}` and `${NAME:-default}` replaced from `vars` (unknown names become empty, as Docker does). */
export function substitute(s: string, vars: Map<string, string>): string {
  return s.replace(/\\\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (all, braced, dflt, bare) => {
    if (all === '\\$') return '$';
    const name = braced ?? bare;
    const v = vars.get(name);
    return v !== undefined && v !== '' ? v : (dflt ?? '');
  });
}

/** A JSON array of strings (the exec form), or null when `rest` is not one. */
function execForm(rest: string): string[] | null {
  if (!rest.startsWith('[')) return null;
  try {
    const v: unknown = JSON.parse(rest);
    return Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'string') ? (v as string[]) : null;
  } catch {
    return null;
  }
}

/** Words split on white space, with double or single quotes grouping (ENV, COPY's shell form). */
function words(s: string): string[] {
  const out: string[] = [];
  const re = /"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g;
  for (let m = re.exec(s); m; m = re.exec(s)) out.push(m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : (m[2] ?? m[3]));
  return out;
}

/** `KEY=value …` pairs (a value may be quoted), or the old `KEY value` form. */
function pairs(rest: string, line: number, keyword: string): Array<[string, string]> {
  const list = words(rest);
  if (list.length === 0) throw new DockerfileError(`line ${line}: ${keyword} needs a name`);
  if (!list[0].includes('=')) {
    const m = /^(\S+)\s+([\s\S]*)$/.exec(rest);
    if (!m || !NAME.test(m[1])) throw new DockerfileError(`line ${line}: ${keyword} needs NAME=value`);
    return [[m[1], m[2]]];
  }
  // Quoted values were grouped by words(); each word is NAME=value.
  const re = /([A-Za-z_][A-Za-z0-9_]*)=("((?:[^"\\]|\\.)*)"|'([^']*)'|(\S*))/g;
  const out: Array<[string, string]> = [];
  let consumed = '';
  for (let m = re.exec(rest); m; m = re.exec(rest)) {
    out.push([m[1], m[3] !== undefined ? m[3].replace(/\\(.)/g, '$1') : (m[4] ?? m[5] ?? '')]);
    consumed += m[0];
  }
  if (out.length === 0 || consumed.replace(/\s/g, '').length !== rest.replace(/\s/g, '').length) {
    throw new DockerfileError(`line ${line}: ${keyword} takes NAME=value pairs`);
  }
  return out;
}

/** The PATH an image has when neither it nor its parents set one (Docker's). */
export const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** What `$NAME` is in a Dockerfile before its own ENV and ARG: its parent image's ENV, over Docker's PATH. */
export const inheritedVars = (parentEnv: Readonly<Record<string, string>>): Record<string, string> => ({ PATH: DEFAULT_PATH, ...parentEnv });

/**
 * Reads a Dockerfile. Throws DockerfileError naming the line of the first problem: an instruction that
 * is not supported, a second FROM, an ADD from a URL, a COPY --from, a malformed instruction. `inherited`:
 * what a `$NAME` is before the file's own ENV and ARG (inheritedVars of the parent image's config;
 * `ENV PATH=/opt/venv/bin:$PATH` keeps the PATH it had, as Docker's).
 */
export function parseDockerfile(text: string, inherited: Readonly<Record<string, string>> = inheritedVars({})): Dockerfile {
  if (Buffer.byteLength(text) > MAX_DOCKERFILE_BYTES) throw new DockerfileError(`the Dockerfile is longer than ${MAX_DOCKERFILE_BYTES} bytes`);
  const vars = new Map<string, string>(Object.entries(inherited));
  let from: string | null = null;
  const steps: Step[] = [];
  for (const { line, keyword, rest } of instructions(text)) {
    if (!KNOWN.includes(keyword)) throw new DockerfileError(`line ${line}: ${keyword} is not an instruction`);
    if (!SUPPORTED.includes(keyword)) throw new DockerfileError(`line ${line}: ${keyword} is not supported`);
    if (keyword === 'FROM') {
      if (from !== null) throw new DockerfileError(`line ${line}: a second FROM (a multi-stage build) is not supported`);
      const w = words(substitute(rest, vars));
      if (w.length === 0) throw new DockerfileError(`line ${line}: FROM needs an image ("base" or one of yours)`);
      if (w.length > 1) throw new DockerfileError(`line ${line}: FROM takes one image (no AS, no --platform)`);
      from = w[0];
      continue;
    }
    if (keyword === 'ARG') {
      const m = /^([A-Za-z_][A-Za-z0-9_]*)(?:=(.*))?$/.exec(rest);
      if (!m) throw new DockerfileError(`line ${line}: ARG needs NAME or NAME=default`);
      const value = m[2] === undefined ? null : (words(m[2])[0] ?? '');
      if (!vars.has(m[1]) || value !== null) vars.set(m[1], value ?? '');
      if (from !== null) steps.push({ line, kind: 'arg', name: m[1], value, text: `ARG ${rest}` });
      continue;
    }
    if (from === null) throw new DockerfileError(`line ${line}: ${keyword} before FROM`);
    if (rest === '') throw new DockerfileError(`line ${line}: ${keyword} needs arguments`);
    switch (keyword) {
      case 'RUN': {
        if (/^--/.test(rest)) throw new DockerfileError(`line ${line}: RUN options (${rest.split(/\s/)[0]}) are not supported`);
        const exec = execForm(rest);
        steps.push(exec ? { line, kind: 'run', argv: exec, shell: false, text: `RUN ${JSON.stringify(exec)}` } : { line, kind: 'run', argv: ['/bin/sh', '-c', rest], shell: true, text: `RUN ${rest}` });
        break;
      }
      case 'COPY':
      case 'ADD': {
        let list = execForm(rest) ?? words(rest);
        let chown: string | null = null;
        let chmod: string | null = null;
        while (list[0]?.startsWith('--')) {
          const [flag, value] = list[0].split(/=(.*)/s);
          if (flag === '--chown' && value) chown = substitute(value, vars);
          else if (flag === '--chmod' && value && /^[0-7]{3,4}$/.test(value)) chmod = value;
          else throw new DockerfileError(`line ${line}: ${keyword} ${flag} is not supported`);
          list = list.slice(1);
        }
        list = list.map((w) => substitute(w, vars));
        if (list.length < 2) throw new DockerfileError(`line ${line}: ${keyword} needs a source and a destination`);
        const sources = list.slice(0, -1);
        const url = sources.find((s) => /^[a-z][a-z0-9+.-]*:\/\//i.test(s));
        if (url) throw new DockerfileError(`line ${line}: ${keyword} from a URL is not supported (fetch it in a RUN step, under the build's egress policy)`);
        const bad = sources.find((s) => s.split('/').includes('..') || s.startsWith('/'));
        if (bad) throw new DockerfileError(`line ${line}: ${keyword} source "${bad}" is outside the build's files`);
        steps.push({ line, kind: 'copy', sources, dest: list.at(-1)!, chown, chmod, text: `${keyword} ${rest}` });
        break;
      }
      case 'ENV': {
        const vs = pairs(rest, line, 'ENV').map(([k, v]) => [k, substitute(v, vars)] as [string, string]);
        for (const [k, v] of vs) vars.set(k, v);
        steps.push({ line, kind: 'env', vars: vs, text: `ENV ${rest}` });
        break;
      }
      case 'WORKDIR':
        steps.push({ line, kind: 'workdir', path: substitute(rest, vars), text: `WORKDIR ${rest}` });
        break;
      case 'USER': {
        const user = substitute(rest, vars);
        if (!/^[A-Za-z0-9_.][A-Za-z0-9_.-]*(:[A-Za-z0-9_.][A-Za-z0-9_.-]*)?$/.test(user)) throw new DockerfileError(`line ${line}: USER "${user}" is not a user name or id`);
        steps.push({ line, kind: 'user', user, text: `USER ${rest}` });
        break;
      }
    }
  }
  if (from === null) throw new DockerfileError('the Dockerfile has no FROM (start with "FROM base")');
  return { from, steps };
}

/** What a built image sets for the processes of its VMs (wire/protocol.ts: the guest reads it). */
export type { ImageConfig };

/** Joins a WORKDIR onto the one before it, as Docker does (a relative one is under the last). */
export function joinWorkdir(current: string, next: string): string {
  const parts = (next.startsWith('/') ? next : `${current}/${next}`).split('/');
  const out: string[] = [];
  for (const p of parts) {
    if (p === '' || p === '.') continue;
    if (p === '..') out.pop();
    else out.push(p);
  }
  return `/${out.join('/')}`;
}

/** The image config after `steps`, starting from the parent's. */
export function configAfter(parent: ImageConfig, steps: Step[]): ImageConfig {
  const c: ImageConfig = { env: { ...parent.env }, workdir: parent.workdir, user: parent.user };
  for (const s of steps) {
    if (s.kind === 'env') for (const [k, v] of s.vars) c.env[k] = v;
    if (s.kind === 'workdir') c.workdir = joinWorkdir(c.workdir, s.path);
    if (s.kind === 'user') c.user = s.user;
  }
  return c;
}

/** The files a COPY source names: the file itself, everything under a directory, or all of them for `.`. */
export function filesOfSource(source: string, files: Iterable<string>): string[] {
  const dir = source.replace(/\/+$/, '').replace(/^\.\/?/, '');
  return [...files].filter((f) => dir === '' || f === dir || f.startsWith(`${dir}/`)).sort();
}
