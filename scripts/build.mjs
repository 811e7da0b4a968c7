// The command's bundle: src/cli/main.ts and everything it loads, as ES modules in dist/ (ignored by git),
// so that a command loads plain JavaScript instead of transpiling the TypeScript tree through tsx at each
// start. `npm ci` runs it (the `prepare` script); bin/agentvm.js runs the sources through tsx instead when
// the bundle is missing or older than a source it was made from, or when AGENTVM_FROM_SOURCE=1.
//
// Each command group is its own chunk (the CLI imports a command's module when that command runs), and the
// packages stay in node_modules, loaded by Node as they are.
import { build } from 'esbuild';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const out = path.join(root, 'dist');

/**
 * A source that finds files beside itself (migrations, console assets, the image builder's files and the
 * guest agent's sources) reads `import.meta.url`: in the bundle it stays the URL of that source file, so
 * those files are found where they are in the tree, whichever chunk the code ends up in.
 */
const EXTERNAL = ['@electric-sql/pglite', 'esbuild', 'pino', 'commander', 'pg-native', 'bufferutil', 'utf-8-validate'];

const sourceLocations = {
  name: 'source-locations',
  setup(b) {
    b.onLoad({ filter: /[\\/]src[\\/].*\.tsx?$/ }, async (args) => {
      const text = await readFile(args.path, 'utf8');
      if (!text.includes('import.meta.url')) return undefined;
      return {
        contents: text.replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href)),
        loader: args.path.endsWith('x') ? 'tsx' : 'ts',
      };
    });
  },
};

const common = {
  absWorkingDir: root,
  bundle: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  // Packages are bundled too (one file instead of hundreds for Node's loader to find and read), but for
  // those that find files beside themselves (PGlite's WebAssembly, esbuild's binary, pino's workers) or
  // load optional native modules.
  external: EXTERNAL,
  banner: { js: "import { createRequire as __agentvmCreateRequire } from 'node:module'; const require = __agentvmCreateRequire(import.meta.url);" },
  // Guest programs imported as their text, as the image build loads them.
  loader: { '.pl': 'text' },
  // Shorter code to read and to keep (V8 holds a module's source for as long as the process runs); names
  // stay as they are, for stack traces.
  minifyWhitespace: true,
  minifySyntax: true,
  metafile: true,
  logLevel: 'warning',
  plugins: [sourceLocations],
};

const startedAt = Date.now();
const tmp = `${out}.tmp-${process.pid}`;
await rm(tmp, { recursive: true, force: true });

// The customer commands' specs, made from the operation descriptors now rather than at each start (zod and
// the API's modules stay out of a customer command's start).
const specsFile = path.join(tmp, 'specs.mjs');
const specsBuild = await build({
  ...common,
  stdin: {
    contents: "import { CUSTOMER_OPERATIONS } from './src/api/routes.ts'; import { specOf } from './src/cli/operationSpec.ts'; export default CUSTOMER_OPERATIONS.map((op) => specOf(op));",
    resolveDir: root,
    loader: 'ts',
    sourcefile: 'operation-specs.ts',
  },
  outfile: specsFile,
});
const specs = (await import(pathToFileURL(specsFile).href)).default;
await rm(specsFile);

const result = await build({
  ...common,
  entryPoints: { agentvm: 'src/cli/main.ts' },
  outdir: tmp,
  chunkNames: 'chunks/[name]-[hash]',
  splitting: true,
  sourcemap: 'linked',
  define: { AGENTVM_OPERATION_SPECS: JSON.stringify(specs) },
});
// What the bundle was made from: a later change to any of them makes bin/agentvm.js run the sources.
const inputs = [...new Set([...Object.keys(specsBuild.metafile.inputs), ...Object.keys(result.metafile.inputs), 'tsconfig.json', 'scripts/build.mjs'])].filter(
  (f) => !f.includes('node_modules') && !f.startsWith('<') && f !== 'operation-specs.ts',
);
await writeFile(path.join(tmp, 'build.json'), `${JSON.stringify({ built_at: startedAt, inputs }, null, 1)}\n`);
await mkdir(out, { recursive: true });
// The new bundle replaces the old one whole.
const old = `${out}.old-${process.pid}`;
await rename(out, old);
await rename(tmp, out);
await rm(old, { recursive: true, force: true });
const bytes = Object.values(result.metafile.outputs).reduce((n, o) => n + o.bytes, 0);
process.stdout.write(`agentvm: bundled ${inputs.length} sources into dist/ (${(bytes / 1024).toFixed(0)} KiB) in ${Date.now() - startedAt} ms\n`);
