#!/usr/bin/env node
// The command runs the bundle that `npm ci` builds (scripts/build.mjs, in dist/): plain JavaScript, each
// command's code loaded when that command runs. It runs the TypeScript sources through tsx instead when
// the bundle is missing or older than any source it was made from (a tree being edited), or when
// AGENTVM_FROM_SOURCE=1.
import { readFileSync, statSync } from 'node:fs';

const root = new URL('../', import.meta.url);

function bundleIsCurrent() {
  if (process.env.AGENTVM_FROM_SOURCE === '1') return false;
  try {
    const { built_at: builtAt, inputs } = JSON.parse(readFileSync(new URL('dist/build.json', root), 'utf8'));
    return inputs.every((file) => statSync(new URL(file, root)).mtimeMs <= builtAt);
  } catch {
    return false;
  }
}

let main;
if (bundleIsCurrent()) {
  ({ main } = await import('../dist/agentvm.js'));
} else {
  const { register } = await import('tsx/esm/api');
  register();
  ({ main } = await import('../src/cli/main.ts'));
}
await main(process.argv);
