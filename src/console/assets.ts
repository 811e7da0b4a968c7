import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';

/**
 * The console's static files: its own CSS and JS beside this file, and the libraries it uses straight from
 * node_modules (no build step). Each is read and compressed once; its URL carries a hash of its content so
 * that browsers may keep it for a year.
 */
export interface Asset {
  name: string;
  type: string;
  body: Buffer;
  gzip: Buffer;
  hash: string;
  url: string;
}

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const fromPackage = (pkg: string, file: string) => path.join(path.dirname(require.resolve(`${pkg}/package.json`)), file);

const SOURCES: Record<string, string> = {
  'console.css': path.join(here, 'assets', 'console.css'),
  'console.js': path.join(here, 'assets', 'console.js'),
  'run-stream.js': path.join(here, 'assets', 'run-stream.js'),
  'spend-chart.js': path.join(here, 'assets', 'spend-chart.js'),
  'htmx.min.js': fromPackage('htmx.org', 'dist/htmx.min.js'),
  'uPlot.min.js': fromPackage('uplot', 'dist/uPlot.iife.min.js'),
  'uPlot.min.css': fromPackage('uplot', 'dist/uPlot.min.css'),
};

const TYPES: Record<string, string> = { '.css': 'text/css; charset=utf-8', '.js': 'text/javascript; charset=utf-8' };

let loaded: Map<string, Asset> | undefined;

export function assets(): Map<string, Asset> {
  if (loaded) return loaded;
  loaded = new Map();
  for (const [name, file] of Object.entries(SOURCES)) {
    const body = readFileSync(file);
    const hash = createHash('sha256').update(body).digest('hex').slice(0, 12);
    loaded.set(name, { name, type: TYPES[path.extname(name)], body, gzip: gzipSync(body, { level: 9 }), hash, url: `/console/assets/${name}?v=${hash}` });
  }
  return loaded;
}

export const assetUrl = (name: keyof typeof SOURCES | string) => {
  const a = assets().get(name);
  if (!a) throw new Error(`no console asset ${name}`);
  return a.url;
};

/** The scripts each kind of page loads, for the page shell and the benchmark that weighs them. */
export const PAGE_SCRIPTS = {
  base: ['htmx.min.js', 'console.js'],
  run: ['htmx.min.js', 'console.js', 'run-stream.js'],
  billing: ['htmx.min.js', 'console.js', 'uPlot.min.js', 'spend-chart.js'],
} as const;
export type PageKind = keyof typeof PAGE_SCRIPTS;
