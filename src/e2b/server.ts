/**
 * E2B compatibility on the API server (decisions section 17): the control plane under `/e2b`
 * (controlPlane.ts; also at the root of the host `api.{preview domain}`, where E2B_DOMAIN sends E2B's
 * SDKs) and the sandbox plane (sandboxPlane.ts) take their requests off the server ahead of the previews
 * and the API; everything else goes on as before. A sweep pauses the sandboxes whose timeout came and
 * that asked to pause (`autoPause`) rather than die.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { getRequestListener } from '@hono/node-server';
import type { GuestAccess } from '../domain/guestAccess.ts';
import type { Services } from '../domain/services.ts';
import type { Logger } from '../log.ts';
import { controlPlane, type E2bGuards } from './controlPlane.ts';
import { sandboxPlane } from './sandboxPlane.ts';
import { forgetProcesses } from './processService.ts';
import * as store from './store.ts';
import { nameUnder } from '../domain/previews.ts';

/** How often the timeouts that pause are looked at: a sandbox pauses at most this long after its end. */
const PAUSE_SWEEP_MS = 1_000;

export function serveE2b(server: Server, services: Services, guest: GuestAccess | null, log: Logger, guards: E2bGuards): { close(): void } {
  const onRequest = server.listeners('request') as ((req: IncomingMessage, res: ServerResponse) => void)[];
  server.removeAllListeners('request');
  const sandbox = sandboxPlane(services, guest, log, guards.throttle);
  const control = getRequestListener(controlPlane(services, log, (t, v) => sandbox.prepare(t, v), guards).fetch);
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const url = req.url ?? '/';
    // E2B_DOMAIN alone: E2B's SDKs reach the control plane at `https://api.{domain}`, at its root.
    if (nameUnder(req.headers.host, services.previews.site.domain) === 'api') {
      req.url = url.startsWith('/') ? `/e2b${url}` : '/e2b/';
      return void control(req, res);
    }
    if (sandbox.handle(req, res)) return;
    if (url === '/e2b' || url.startsWith('/e2b/') || url.startsWith('/e2b?')) return void control(req, res);
    for (const l of onRequest) l.call(server, req, res);
  });

  // One sweep at a time: a pause under way is no longer due (its VM is no longer running).
  let sweeping = false;
  const sweep = setInterval(() => {
    if (sweeping) return;
    sweeping = true;
    void (async () => {
      const now = services.clock.now();
      await store.renewWoken(services.db, now);
      for (const s of await store.duePauses(services.db, now)) {
        if (!s.auto_pause_memory) forgetProcesses(s.vm_id);
        await services.vms.lifecycle(s.tenant_id, s.vm_id, s.auto_pause_memory ? 'suspend' : 'stop').catch((err: Error) => log.warn({ vm_id: s.vm_id, err: err.message }, 'e2b sandbox did not pause at its timeout'));
      }
    })()
      .catch(() => undefined)
      .finally(() => (sweeping = false));
  }, PAUSE_SWEEP_MS);
  sweep.unref();
  return { close: () => clearInterval(sweep) };
}
