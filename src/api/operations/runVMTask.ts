import { z } from 'zod';
import { defineOperation } from '../operation.ts';
import { IdParam, Run, RunTaskRequest, RunTaskResult } from '../schemas.ts';
import { presentRun, presentRunResult } from '../present.ts';
import { requestHeader } from '../../http/requestHeader.ts';

/** `Prefer: respond-async` (RFC 7240), among other preferences. */
const wantsAsync = (prefer: string | undefined) => !!prefer && prefer.split(',').some((p) => p.split(';')[0].trim().toLowerCase() === 'respond-async');

export const runVMTask = defineOperation({
  operationId: 'runVMTask',
  method: 'post',
  path: '/v1/api/vms/{id}/run',
  summary: "Run one headless task with the VM's harness",
  description:
    'The server builds the command from the harness; the task is passed as one argument, never through a shell. ' +
    'Runs of one VM go one at a time in the order they came. The run is a record (extension): it goes on if the ' +
    'client goes away, and `GET …/runs/{run_id}` or its event stream has it. With `Prefer: respond-async` the answer ' +
    'is 202 with the queued Run at once.',
  tag: 'VMs',
  audience: 'customer',
  mcp: { tool: 'vm_run', asyncArgument: { name: 'wait', description: 'false: answer the queued run at once (follow it with run_get); default true: answer the finished run' } },
  params: IdParam,
  headers: z.object({
    Prefer: z.string().optional().meta({ description: '`respond-async`: answer 202 with the Run at once instead of waiting for its end (extension)' }),
  }),
  body: { schema: RunTaskRequest, required: true },
  success: { status: 200, schema: RunTaskResult, description: 'The finished run' },
  alsoAnswers: { status: 202, schema: Run, description: 'The run, queued (with `Prefer: respond-async`)' },
  errors: ['not_found', 'vm_not_running', 'unavailable'],
  handler: async ({ c, services, principal, params, body }) => {
    if (wantsAsync(requestHeader(c, 'prefer'))) {
      const run = await services.runs.start(principal.tenantId, params.id, body);
      return { body: presentRun(run) as never, status: 202, headers: { 'Preference-Applied': 'respond-async', Location: `/v1/api/vms/${params.id}/runs/${run.run_id}` } };
    }
    return { body: presentRunResult(await services.runs.run(principal.tenantId, params.id, body)) };
  },
});
