import { call, ClientError, type ApiClient } from '../api.ts';
import type { ConsoleApp, ConsoleContext, ConsoleDeps } from '../app.tsx';
import { noticeFor } from '../components.tsx';
import { page } from '../layout.tsx';
import type { ConsoleSession } from '../../domain/sessions.ts';
import { PortsSection, registerPorts } from './ports.tsx';
import { CaptureSection, registerCapture } from './vm/capture.tsx';
import { registerDestroy } from './vm/destroy.tsx';
import { EgressSection, registerEgress } from './vm/egress.tsx';
import { Facts, registerFacts } from './vm/facts.tsx';
import { FilesSection, registerFiles } from './vm/files.tsx';
import { LifetimeSection, registerLifetime } from './vm/lifetime.tsx';
import { RunsSection } from './vm/runs.tsx';
import { registerSecrets, SecretsSection } from './vm/secrets.tsx';
import { registerSnapshots, SnapshotsSection } from './vm/snapshots.tsx';
import type { VmAct, VmSection } from './vm/section.ts';
import { registerTask, TaskSection } from './vm/task.tsx';
import { registerTerminal, TerminalSection } from './vm/terminal.tsx';

/** The sections of a VM's page, in order, below its facts: a part of the page is a file in vm/ added here. */
const VM_SECTIONS: VmSection[] = [
  TaskSection,
  async (ctx) => TerminalSection(ctx),
  FilesSection,
  PortsSection,
  RunsSection,
  EgressSection,
  SecretsSection,
  SnapshotsSection,
  CaptureSection,
  LifetimeSection,
];

/** A VM's page: its facts and lifecycle buttons, then each section; `problem` is a refusal of what was just asked. */
export async function vmPage(c: ConsoleContext, id: string, opts: { problem?: ClientError; status?: number } = {}) {
  const api = c.get('api') as ApiClient;
  const session = c.get('session') as ConsoleSession;
  const vm = await call(api.GET('/v1/api/vms/{id}', { params: { path: { id } } }));
  const sections = await Promise.all(VM_SECTIONS.map((s) => s({ vm, session, api, c })));
  return page(
    c,
    {
      title: vm.vm_id,
      section: 'vms',
      session,
      crumbs: [{ href: '/console/vms', label: 'VMs' }],
      problem: opts.problem,
      status: opts.status,
      notice: noticeFor(c.req.query('done')),
    },
    <div class="vm-page">
      <Facts vm={vm} session={session} />
      {sections}
    </div>,
  );
}

export function registerVm(app: ConsoleApp, deps: ConsoleDeps) {
  const act: VmAct = async (c, change) => {
    try {
      return c.redirect(await change(), 303);
    } catch (err) {
      if (!(err instanceof ClientError)) throw err;
      return vmPage(c, c.req.param('id')!, { problem: err, status: err.status });
    }
  };
  app.get('/vms/:id', (c) => vmPage(c, c.req.param('id')));
  registerFacts(app, act);
  registerDestroy(app, act);
  registerTask(app, act);
  registerTerminal(app, vmPage);
  registerFiles(app, deps, act);
  registerPorts(app);
  registerEgress(app, act);
  registerSecrets(app, act);
  registerSnapshots(app, act);
  registerCapture(app, act);
  registerLifetime(app, act);
}
