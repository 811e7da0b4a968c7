// The baseline: a bare hello route on the same framework and adapter as agentvm, in its own process.
import { Hono } from 'hono';
import { serve } from '@hono/node-server';

const app = new Hono();
app.get('/hello', (c) => c.json({ hello: 'world' }));
const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, (info) => {
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${info.port}` })}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
