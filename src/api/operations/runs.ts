import { z } from 'zod';
import { defineOperation } from '../operation.ts';
import { IdParam, Run, RunEventStream, RunList, RunListQuery, RunParams } from '../schemas.ts';
import { presentRun } from '../present.ts';
import { requestHeader } from '../../http/requestHeader.ts';
import { eventStreamResponse } from '../eventStream.ts';
import type { RunEvent } from '../../domain/runs.ts';

export const listVMRuns = defineOperation({
  operationId: 'listVMRuns',
  method: 'get',
  path: '/v1/api/vms/{id}/runs',
  summary: "A VM's runs, newest first (extension)",
  description: 'Every run of the VM, queued, running or finished, with its output; kept until the VM is destroyed.',
  tag: 'VMs',
  audience: 'customer',
  mcp: { tool: 'runs_list' },
  cli: { command: 'runs list', columns: ['run_id', 'status', 'exit_code', 'duration_ms', 'created_at', 'task'], paged: true, examples: ['agentvm runs list vm_…'] },
  extension: true,
  params: IdParam,
  query: RunListQuery,
  success: { status: 200, schema: RunList, description: 'One page of runs' },
  errors: ['not_found'],
  handler: async ({ services, principal, params, query }) => {
    const { rows, total } = await services.runs.list(principal.tenantId, params.id, query.limit, query.offset);
    const end = query.offset + rows.length;
    const hasMore = end < total;
    return { body: { data: rows.map(presentRun), total, has_more: hasMore, next_offset: hasMore ? end : null } };
  },
});

export const getVMRun = defineOperation({
  operationId: 'getVMRun',
  method: 'get',
  path: '/v1/api/vms/{id}/runs/{run_id}',
  summary: 'One run of a VM, with its output so far (extension)',
  tag: 'VMs',
  audience: 'customer',
  mcp: { tool: 'run_get' },
  cli: { command: 'runs get', examples: ['agentvm runs get vm_… run_…'] },
  extension: true,
  params: RunParams,
  success: { status: 200, schema: Run, description: 'The run' },
  errors: ['not_found'],
  handler: async ({ services, principal, params }) => ({ body: presentRun(await services.runs.get(principal.tenantId, params.id, params.run_id)) }),
});

export const cancelVMRun = defineOperation({
  operationId: 'cancelVMRun',
  method: 'post',
  path: '/v1/api/vms/{id}/runs/{run_id}/cancel',
  summary: 'Cancel a run: a queued one never starts, a running one has its whole process group killed (extension)',
  description: 'Answers the run once it has ended as `cancelled`; a run that had already finished is answered as it is.',
  tag: 'VMs',
  audience: 'customer',
  mcp: { tool: 'run_cancel', destructive: true, idempotent: true },
  cli: { command: 'runs cancel', examples: ['agentvm runs cancel vm_… run_…'] },
  extension: true,
  params: RunParams,
  success: { status: 200, schema: Run, description: 'The run' },
  errors: ['not_found', 'vm_not_running'],
  handler: async ({ services, principal, params }) => ({ body: presentRun(await services.runs.cancel(principal.tenantId, params.id, params.run_id)) }),
});

function sseFrame(e: RunEvent): string {
  if (e.type === 'end') return `event: end\ndata: ${JSON.stringify(presentRun(e.run))}\n\n`;
  return `id: ${e.seq}\nevent: ${e.type}\ndata: ${JSON.stringify({ text: e.text })}\n\n`;
}

export const streamVMRun = defineOperation({
  operationId: 'streamVMRun',
  method: 'get',
  path: '/v1/api/vms/{id}/runs/{run_id}/events',
  summary: "A run's output as server-sent events, live, then its end (extension)",
  description:
    'Output reaches the stream as the guest prints it. Any number of clients may follow one run; a finished run replays ' +
    'and ends. After a dropped connection, send the last `id:` seen as `Last-Event-ID` to go on exactly after it.',
  tag: 'VMs',
  audience: 'customer',
  extension: true,
  params: RunParams,
  headers: z.object({
    'Last-Event-ID': z.string().optional().meta({ description: 'The id of the last event seen: the stream starts after it' }),
  }),
  success: { status: 200, schema: RunEventStream, description: 'The event stream', contentType: 'text/event-stream' },
  errors: ['not_found', 'quota_exceeded'],
  handler: async ({ c, services, principal, params }) => {
    const { run, after } = await services.runs.beginFollowing(principal.tenantId, params.id, params.run_id, requestHeader(c, 'last-event-id'));
    // An open stream counts in run_streams until it ends or its client goes.
    const lease = await services.limits.openStream(principal.tenantId, 'events');
    const response = eventStreamResponse(c, lease, (write, signal) => services.runs.follow(run.run_id, after, (e) => write(sseFrame(e)), signal));
    return { body: '', response };
  },
});
