/**
 * A running VM's channels to its guest agent: one request at a time on its agent port (exec, ping,
 * runs, files' opening words), byte streams on its data port once that is in step with the guest.
 */
import { agentRequest, type JsonLineChannel } from './channel.ts';
import type { DataChannel } from './dataChannel.ts';
import type { RunningVms } from './running.ts';

/** A host's first word on a VM's data port: the guest marks where this connection's bytes begin (dataChannel.ts). */
async function syncData(agent: JsonLineChannel, data: DataChannel, timeoutMs: number): Promise<void> {
  await agentRequest(agent, 'data_sync', { token: data.startSync() }, timeoutMs);
}

/** One request to the VM's guest agent. */
export async function request<T>(vms: RunningVms, vmId: string, op: string, args: unknown, timeoutMs: number): Promise<T> {
  const h = vms.get(vmId);
  if (!h) throw new Error(`${vmId} is not running`);
  return agentRequest<T>(h.agent, op, args, timeoutMs);
}

/** Resolves once the VM's data port is in step with its guest (see dataChannel). */
export async function dataReady(vms: RunningVms, vmId: string): Promise<void> {
  const h = vms.get(vmId);
  if (!h) return;
  h.dataSynced ??= syncData(h.agent, h.data, 30_000).catch((err: Error) => {
    vms.opts.log?.('the data port did not come in step; shells and files of this VM are unavailable', { vm_id: vmId, err: err.message });
    h.data.close({ error: 'unavailable', message: 'the VM data port is not in step with its guest' });
  });
  await h.dataSynced;
}

/** The VM's data port (byte streams to its guest agent; await dataReady first); throws when the VM is not running here. */
export function dataChannel(vms: RunningVms, vmId: string): DataChannel {
  const h = vms.get(vmId);
  if (!h || h.stopping) throw new Error(`${vmId} is not running`);
  return h.data;
}
