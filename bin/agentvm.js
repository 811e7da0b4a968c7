#!/usr/bin/env node
// The command runs the TypeScript sources directly: no build step between `npm ci` and `npx agentvm`.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
await main(process.argv);
