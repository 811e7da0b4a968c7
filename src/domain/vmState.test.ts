import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ACTION_TARGET, actionsFor, applyLifecycle, canSuspend, isResting, isTransitional, RESTING, TRANSITIONAL, VM_STATUSES, type LifecycleAction, type VmStateFields } from './vmState.ts';

const vm = (status: VmStateFields['status'], desired: VmStateFields['desired_state'] = status === 'stopped' ? 'stopped' : 'running'): VmStateFields => ({
  status,
  status_reason: null,
  desired_state: desired,
  restart_requested: 0,
  reprovision_requested: 0,
});

test('stop on a stopped VM and start on a running VM are no-ops', () => {
  assert.equal(applyLifecycle(vm('stopped'), 'stop'), null);
  assert.equal(applyLifecycle(vm('stopping', 'stopped'), 'stop'), null);
  assert.equal(applyLifecycle(vm('running'), 'start'), null);
  assert.equal(applyLifecycle(vm('starting'), 'start'), null);
  assert.equal(applyLifecycle(vm('provisioning'), 'start'), null);
});

test('stop and start set the desired state and show the transition', () => {
  assert.deepEqual(applyLifecycle(vm('running'), 'stop'), { desired_state: 'stopped', status: 'stopping', status_reason: null });
  assert.deepEqual(applyLifecycle(vm('stopped'), 'start'), { desired_state: 'running', status: 'starting', status_reason: null });
  // A stop during a start is accepted and wins: the last call is the desired state.
  assert.deepEqual(applyLifecycle(vm('starting'), 'stop'), { desired_state: 'stopped', status: 'stopping', status_reason: null });
  assert.deepEqual(applyLifecycle(vm('stopping', 'stopped'), 'start'), { desired_state: 'running', status: 'starting', status_reason: null });
});

test('restart and reprovision of a stopped VM leave it running, and count each request', () => {
  const restarted = applyLifecycle({ ...vm('stopped'), restart_requested: 2 }, 'restart');
  assert.deepEqual(restarted, { desired_state: 'running', status: 'restarting', status_reason: null, restart_requested: 3 });
  const reprovisioned = applyLifecycle(vm('stopped'), 'reprovision');
  assert.deepEqual(reprovisioned, { desired_state: 'running', status: 'reprovisioning', status_reason: null, reprovision_requested: 1 });
});

test('a failed VM: start clears the platform reason, stop keeps it', () => {
  const failed = { ...vm('failed'), status_reason: 'qemu exited with signal 9' };
  assert.deepEqual(applyLifecycle(failed, 'start'), { desired_state: 'running', status: 'starting', status_reason: null });
  assert.deepEqual(applyLifecycle(failed, 'stop'), { desired_state: 'stopped', status: 'stopped', status_reason: 'qemu exited with signal 9' });
});

test('suspend: a running VM starts suspending; a suspended one is a no-op; any other is refused (canSuspend)', () => {
  assert.deepEqual(applyLifecycle(vm('running'), 'suspend'), { desired_state: 'suspended', status: 'suspending', status_reason: null });
  assert.equal(applyLifecycle(vm('suspended', 'suspended'), 'suspend'), null);
  assert.equal(applyLifecycle(vm('suspending', 'suspended'), 'suspend'), null);
  assert.equal(canSuspend(vm('suspended', 'suspended')), true);
  for (const status of ['stopped', 'starting', 'provisioning', 'restarting', 'failed', 'stopping'] as const) {
    assert.equal(canSuspend(vm(status)), false, status);
    assert.equal(applyLifecycle(vm(status), 'suspend'), null, status);
  }
  // Running but asked to stop: not a VM to suspend.
  assert.equal(canSuspend(vm('running', 'stopped')), false);
});

test('a suspended VM: start resumes it, stop/restart/reprovision leave the suspend (its host discards the memory)', () => {
  const suspended = vm('suspended', 'suspended');
  assert.deepEqual(applyLifecycle(suspended, 'start'), { desired_state: 'running', status: 'starting', status_reason: null });
  assert.deepEqual(applyLifecycle(suspended, 'stop'), { desired_state: 'stopped', status: 'stopping', status_reason: null });
  assert.equal(applyLifecycle(suspended, 'restart')?.desired_state, 'running');
  assert.equal(applyLifecycle(suspended, 'reprovision')?.desired_state, 'running');
  // Start while it is still being suspended: it resumes once saved.
  assert.deepEqual(applyLifecycle(vm('suspending', 'suspended'), 'start'), { desired_state: 'running', status: 'starting', status_reason: null });
});

test('each status is resting or on its way to one, never both; failed rests (the contract: it stays until asked)', () => {
  for (const s of VM_STATUSES) assert.equal(isResting(s), !isTransitional(s), s);
  assert.ok(isResting('failed'));
  assert.ok(!isResting('deleted') && !isTransitional('deleted'));
});

test('the actions a status offers each change something; the ones it leaves out are no-ops or refused', () => {
  const desiredOf = { running: 'running', stopped: 'stopped', suspended: 'suspended', failed: 'running' } as const;
  for (const status of RESTING) {
    const at = vm(status, desiredOf[status]);
    const offered = actionsFor(status);
    for (const action of offered) assert.notEqual(applyLifecycle(at, action), null, `${action} on ${status}`);
    for (const action of Object.keys(ACTION_TARGET) as LifecycleAction[]) {
      if (offered.includes(action)) continue;
      const changes = applyLifecycle(at, action);
      assert.ok(changes === null || (action === 'stop' && changes.status === 'stopped'), `${action} on ${status} is left out yet changes ${JSON.stringify(changes)}`);
    }
  }
  for (const status of TRANSITIONAL) assert.deepEqual(actionsFor(status), ['stop']);
});
