#!/usr/bin/env node
/**
 * The layers of src/ and which way their imports may point, checked on every `npm test`
 * (test/layers.test.ts): `node scripts/check-layers.mjs [root]` prints each crossing and exits 1.
 * Type-only imports count: a type ties a file to its layer as much as a value does. Unit tests
 * beside the code (*.test.ts) may reach further, to build what they test; every other file may not.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/** What each folder of src/ may import besides itself; a folder not named here is a front end or the composition root. */
export const LAYERS = {
  wire: { job: 'the host↔guest protocol, shared by both ends', may: [] },
  guest: { job: 'the agent inside a VM, bundled alone', may: ['wire'] },
  store: { job: 'one repository per table: SQL only', may: ['wire', 'net'] },
  net: { job: 'addresses: their one spelling, the ranges the platform never connects to, the egress policy, the standby slots', may: [] },
  harness: { job: 'the coding agents a VM can run, and how to invoke them', may: ['wire'] },
  image: { job: 'the guest image and how it is built', may: ['wire', 'harness', 'domain/baseImage.ts'] },
  domain: { job: 'the platform\'s rules, over the store', may: ['store', 'harness', 'wire', 'feeds', 'net'] },
  feeds: { job: 'news of changes between processes (LISTEN/NOTIFY)', may: ['store'] },
  vmm: { job: 'the QEMU driver', may: ['wire', 'net', 'harness', 'image'] },
  jobs: { job: 'periodic and queued work', may: ['domain', 'store', 'feeds', 'net'] },
  http: { job: 'HTTP plumbing both servers share: the error statuses, the body cap, socket upgrades, the shell bridge', may: ['domain/guestAccess.ts'] },
  host: { job: 'a VM host: reconciler, guest access, egress gateway, its internal API', may: ['domain', 'store', 'vmm', 'wire', 'harness', 'image', 'jobs', 'feeds', 'net', 'http'] },
};
/** Imports refused inside a folder the layers leave free: an operation is served by the app, it does not reach back into it. */
export const FORBIDDEN = [{ from: 'api/operations/', to: 'api/app.ts', why: 'an operation may not import the app that serves it (a circle)' }];

/** Files any layer may import: the closed list of error codes, and the root's logger and settings. */
export const SHARED = ['domain/errors.ts', 'log.ts', 'config.ts', 'throttle.ts'];

const here = path.dirname(fileURLToPath(import.meta.url));

function sourceFiles(dir) {
  const out = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...sourceFiles(p));
    else if (/\.(ts|tsx|mts|mjs|js)$/.test(e.name) && !e.name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

/** The folder of src/ a path (relative to src/) is in, or '' for the root's own files. */
const layerOf = (rel) => (rel.includes('/') ? rel.slice(0, rel.indexOf('/')) : '');

/** Whether `to` (relative to src/) is among `allowed` (folders, or single files by their path). */
const allows = (allowed, to) => allowed.some((a) => (a.includes('.') ? to === a : layerOf(to) === a));

/**
 * Every import in src/ under `root` that crosses a layer the wrong way. `override` gives some files'
 * text instead of the disk's (by path relative to root), to see what a change would do.
 */
export function crossings(root = path.join(here, '..'), override = {}) {
  const src = path.join(root, 'src');
  const texts = new Map(sourceFiles(src).map((f) => [path.relative(root, f), null]));
  for (const f of Object.keys(override)) texts.set(f, override[f]);
  const found = [];
  for (const [file, given] of texts) {
    if (/\.test\.tsx?$/.test(file)) continue;
    const from = path.relative(src, path.join(root, file));
    const rule = LAYERS[layerOf(from)];
    const refused = FORBIDDEN.filter((f) => from.startsWith(f.from));
    if (!rule && !refused.length) continue;
    const text = given ?? readFileSync(path.join(root, file), 'utf8');
    for (const imp of ts.preProcessFile(text, true, true).importedFiles) {
      if (!imp.fileName.startsWith('.')) continue;
      const to = path.relative(src, path.resolve(path.dirname(path.join(root, file)), imp.fileName));
      const line = text.slice(0, imp.pos).split('\n').length;
      const forbidden = refused.find((f) => f.to === to);
      if (forbidden) found.push({ file, line, to: `src/${to}`, rule: forbidden.why });
      if (!rule || to.startsWith('..') || layerOf(to) === layerOf(from)) continue;
      if (allows(rule.may, to) || SHARED.includes(to)) continue;
      found.push({ file, line, to: `src/${to}`, rule: `${layerOf(from)}/ (${rule.job}) may import only ${[...rule.may, ...SHARED].join(', ') || 'itself'}` });
    }
  }
  return found;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const found = crossings(process.argv[2] ? path.resolve(process.argv[2]) : undefined);
  for (const c of found) console.log(`${c.file}:${c.line} imports ${c.to}: ${c.rule}`);
  if (found.length) {
    console.log(`${found.length} import(s) cross a layer (scripts/check-layers.mjs)`);
    process.exitCode = 1;
  } else console.log('layers hold: no import crosses a layer');
}
