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
  'terminal.js': path.join(here, 'assets', 'terminal.js'),
  'htmx.min.js': fromPackage('htmx.org', 'dist/htmx.min.js'),
  'uPlot.min.js': fromPackage('uplot', 'dist/uPlot.iife.min.js'),
  'uPlot.min.css': fromPackage('uplot', 'dist/uPlot.min.css'),
  // xterm.js as ES modules: smaller than its UMD build (86 against 118 KiB compressed), imported by terminal.js.
  'xterm.mjs': fromPackage('@xterm/xterm', 'lib/xterm.mjs'),
  'xterm.css': fromPackage('@xterm/xterm', 'css/xterm.css'),
  'addon-fit.mjs': fromPackage('@xterm/addon-fit', 'lib/addon-fit.mjs'),
};

const TYPES: Record<string, string> = { '.css': 'text/css; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.mjs': 'text/javascript; charset=utf-8' };

/**
 * A library's closing `//# sourceMappingURL=` comment names a map the console does not serve: dropped, so that a
 * browser's developer tools do not ask for it.
 */
const withoutSourceMap = (body: Buffer) => Buffer.from(body.toString('utf8').replace(/\n\/[/*]# sourceMappingURL=[^\n]*\s*$/, '\n'));

let loaded: Map<string, Asset> | undefined;

export function assets(): Map<string, Asset> {
  if (loaded) return loaded;
  loaded = new Map();
  for (const [name, file] of Object.entries(SOURCES)) {
    const body = file.includes(`${path.sep}node_modules${path.sep}`) ? withoutSourceMap(readFileSync(file)) : readFileSync(file);
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

/**
 * The scripts each kind of page loads, for the page shell and the benchmark that weighs them. A name in
 * MODULE_SCRIPTS is an ES module; one in PRELOADED_MODULES is a library that such a module imports, which the
 * page names as a `modulepreload` so that it is fetched at once.
 */
export const PAGE_SCRIPTS = {
  base: ['htmx.min.js', 'console.js'],
  run: ['htmx.min.js', 'console.js', 'run-stream.js'],
  billing: ['htmx.min.js', 'console.js', 'uPlot.min.js', 'spend-chart.js'],
  terminal: ['console.js', 'terminal.js', 'xterm.mjs', 'addon-fit.mjs'],
} as const;
export type PageKind = keyof typeof PAGE_SCRIPTS;
export const MODULE_SCRIPTS: ReadonlySet<string> = new Set(['terminal.js']);
export const PRELOADED_MODULES: ReadonlySet<string> = new Set(['xterm.mjs', 'addon-fit.mjs']);
/** The stylesheets a kind of page loads besides console.css. */
export const PAGE_STYLES: Partial<Record<PageKind, string[]>> = { billing: ['uPlot.min.css'], terminal: ['xterm.css'] };
/**
 * Kinds of page excepted from the budget of 150 KiB of compressed JavaScript a page: the terminal, whose
 * emulator (xterm.js) alone is about 86 KiB. It loads on its own page only.
 */
export const OVER_BUDGET: ReadonlySet<PageKind> = new Set(['terminal']);
