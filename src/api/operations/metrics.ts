import { defineOperation } from '../operation.ts';
import { IdParam, VmMetrics } from '../schemas.ts';
import { iso } from '../present.ts';

export const getVMMetrics = defineOperation({
  operationId: 'getVMMetrics',
  method: 'get',
  path: '/v1/api/vms/{id}/metrics',
  summary: "A VM's latest CPU, memory, persist-disk and egress sample (extension)",
  description:
    "Its host samples each running VM every 5 s (CPU from QEMU, memory and disk from the guest agent, egress from the gateway's log). " +
    'A VM that has stopped answers its last sample; one never sampled answers 409 `vm_not_running` (or 503 `unavailable` in the first seconds after it starts).',
  tag: 'VMs',
  audience: 'customer',
  mcp: { tool: 'vm_metrics' },
  cli: { command: 'vms metrics', examples: ['agentvm vms metrics vm_…'] },
  extension: true,
  params: IdParam,
  success: { status: 200, schema: VmMetrics, description: 'The latest sample' },
  errors: ['not_found', 'vm_not_running', 'unavailable'],
  handler: async ({ services, principal, params }) => {
    const { vm, sample } = await services.vms.metrics(principal.tenantId, params.id);
    return {
      body: {
        cpu_percent: sample.cpu_percent,
        memory_used_mib: sample.memory_used_mib,
        memory_mib: vm.memory_mib,
        disk_used_bytes: sample.disk_used_bytes,
        disk_bytes: vm.disk_gib * 2 ** 30,
        egress_bytes_out: sample.egress_bytes_out,
        egress_bytes_in: sample.egress_bytes_in,
        sampled_at: iso(sample.sampled_at),
      },
    };
  },
});
