import { call, ClientError } from '../../api.ts';
import { field, type ConsoleApp } from '../../app.tsx';
import { vmPath } from '../../components.tsx';
import { ConfirmForm } from '../../form.tsx';
import { page } from '../../layout.tsx';
import type { VmAct } from './section.ts';

/** Destroying a VM: asked first, with the VM's id typed to confirm. */
export function registerDestroy(app: ConsoleApp, act: VmAct) {
  app.get('/vms/:id/destroy', async (c) => {
    const vm = await call(c.get('api').GET('/v1/api/vms/{id}', { params: { path: { id: c.req.param('id') } } }));
    const session = c.get('session');
    return page(
      c,
      { title: 'Destroy this VM?', section: 'vms', session, crumbs: [{ href: '/console/vms', label: 'VMs' }, { href: vmPath(vm.vm_id), label: vm.vm_id }] },
      <ConfirmForm session={session} action={`${vmPath(vm.vm_id)}/destroy`} label="Destroy VM" keep={vmPath(vm.vm_id)}>
        <p>
          Destroying <strong class="mono">{vm.vm_id}</strong> stops it, stops its billing and <strong>removes its disks, the persist disk included</strong>. This cannot be undone.
        </p>
        <label for="confirm-id">Type the VM's id to confirm</label>
        <input id="confirm-id" name="confirm" required autocomplete="off" spellcheck={false} />
      </ConfirmForm>,
    );
  });
  app.post('/vms/:id/destroy', async (c) => {
    const id = c.req.param('id')!;
    const confirm = await field(c, 'confirm');
    return act(c, async () => {
      if (confirm !== id) throw new ClientError('invalid_request', 'confirm: the id typed does not match this VM', 'nothing was destroyed; type the id exactly', 400);
      await call(c.get('api').DELETE('/v1/api/vms/{id}', { params: { path: { id } } }));
      return '/console/vms?done=destroyed';
    });
  });
}
