/**
 * The first resume of a VM made from a snapshot (branch.ts): its guest wakes as the VM the snapshot
 * was taken of, its assume program blocked on its port. The host's first line to it is then a whole
 * identity, as a clone's first line is (clock, reseeded RNG, hostname, machine id, address, gateway,
 * /etc, instance, boot id), answered with the guest's facts; then the runs that were in flight at the instant
 * (they stay with the VM they belong to) are ended in it.
 */
import { randomUUID } from 'node:crypto';
import { agentRequest } from './channel.ts';
import type { Machine } from './machine.ts';
import { assumeArgs, assumeSteps } from './launch.ts';
import type { VmSpec } from './driver.ts';
import type { BranchMark } from './branch.ts';
import { assumeLine, factsFromAssumed, type HelloFacts } from '../wire/protocol.ts';

export async function takeBranchIdentity(m: Machine, spec: VmSpec, mark: BranchMark, phases: Record<string, number>): Promise<HelloFacts> {
  let t = performance.now();
  const timeoutMs = Math.max(10_000, m.deadline - Date.now());
  const out = await m.assume(assumeLine({ ...assumeArgs(spec), boot_id: randomUUID() }), { timeoutMs });
  if (out.error) throw new Error(`the guest could not take its identity: ${out.error}`);
  // A guest whose assume program knows only the clock sets it and answers no identity.
  if (out.hostname !== spec.hostname) throw new Error('the guest did not take a new identity (its image is older than branching)');
  phases.identity_ms = performance.now() - t;
  Object.assign(phases, assumeSteps(out));
  t = performance.now();
  for (const runId of mark.runs) await agentRequest(m.agent, 'run_cancel', { run_id: runId }, 10_000).catch(() => undefined);
  phases.runs_ended_ms = performance.now() - t;
  return factsFromAssumed(out);
}
