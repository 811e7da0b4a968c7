import { z } from 'zod';
import { defineOperation } from '../operation.ts';
import { IdParam, idParam } from '../schemas.ts';

const PortParams = z.strictObject({
  id: idParam('A VM id (`vm_…`)'),
  port: z.string().meta({ description: 'A TCP port in the VM: 1024–65535, or 80 or 443' }),
});

export const VmPort = z
  .object({
    port: z.int(),
    process: z.string().nullable().meta({ description: 'The name of a process that listens on it; null when unknown' }),
    public: z.boolean().meta({ description: 'Reachable without a credential' }),
    url: z.string().meta({ description: "Its preview URL, `{scheme}://{port}-{vm label}.{AGENTVM_PREVIEW_DOMAIN}/` (needs a credential unless public)" }),
  })
  .meta({ id: 'VMPort' });

const VmPortList = z.object({ data: z.array(VmPort) }).meta({ id: 'VMPortList' });
const SetVmPortRequest = z.strictObject({ public: z.boolean().meta({ description: 'true: anyone with the URL reaches the port; false: a credential is needed again' }) }).meta({ id: 'SetVMPortRequest' });
const PreviewToken = z
  .object({ token: z.string().meta({ description: "The VM's preview token: header `X-Agentvm-Preview-Token`, or `?agentvm_token=` once (it becomes a cookie for that host)" }) })
  .meta({ id: 'PreviewToken' });

export const listVMPorts = defineOperation({
  operationId: 'listVMPorts',
  method: 'get',
  path: '/v1/api/vms/{id}/ports',
  summary: 'The TCP ports listening in a VM now, with their preview URLs (extension)',
  description:
    'Ports 1024–65535, 80 and 443 that a process listens on (on every address or on loopback), read in the guest. ' +
    'A preview URL is private unless the port is public: it needs the API key, the preview token (`rotatePreviewToken`) or its cookie.',
  tag: 'VMs',
  audience: 'customer',
  mcp: { tool: 'vm_ports' },
  cli: { command: 'vms ports', columns: ['port', 'process', 'public', 'url'], examples: ['agentvm vms ports vm_…'] },
  extension: true,
  params: IdParam,
  success: { status: 200, schema: VmPortList, description: 'The listening ports' },
  errors: ['not_found', 'vm_not_running', 'unavailable'],
  extensions: {
    // A port forward (`agentvm vms forward`): one TCP connection to a port of the VM, any protocol.
    'x-agentvm-websocket': {
      path: '/v1/api/vms/{id}/ports/{port}/socket',
      headers: {
        Authorization: "`Bearer` and the tenant's API key (any scope)",
        'X-Agentvm-Preview-Token': "or the VM's preview token (a public port needs neither)",
      },
      client_frames: { binary: 'bytes for the connection to the port on the guest\'s loopback' },
      server_frames: { binary: 'bytes the app sent' },
      close: 'when the connection ends on either side; a suspended VM with `auto_resume` is started first (up to 30 s)',
      refusals: {
        400: 'invalid_request: a port outside 1024–65535, 80, 443',
        401: 'unauthorized: no credential, or a wrong one',
        404: "not_found: no such VM (another tenant's too)",
        409: 'vm_not_running',
        429: 'rate_limited: too many failed authentications from this address',
        502: 'port_closed: nothing listens on the port',
      },
    },
  },
  handler: async ({ services, principal, params }) => ({ body: { data: await services.previews.list(principal.tenantId, params.id) } }),
});

export const setVMPort = defineOperation({
  operationId: 'setVMPort',
  method: 'put',
  path: '/v1/api/vms/{id}/ports/{port}',
  summary: "Make a VM's port public or private (extension)",
  description:
    'A public port answers its preview URL without a credential; ports are private by default. Nothing need listen on it yet. ' +
    "A sandbox made through E2B's API has every port public (its allowPublicTraffic); making one private ends that rule: the ports listening then stay public one by one.",
  tag: 'VMs',
  audience: 'customer',
  mcp: { tool: 'vm_port_set' },
  extension: true,
  params: PortParams,
  body: { schema: SetVmPortRequest, required: true },
  success: { status: 200, schema: VmPort, description: 'The port' },
  errors: ['not_found', 'invalid_request'],
  handler: async ({ services, principal, params, body }) => ({
    body: await services.previews.setPublic(principal.tenantId, params.id, params.port, body.public),
  }),
});

export const rotatePreviewToken = defineOperation({
  operationId: 'rotatePreviewToken',
  method: 'post',
  path: '/v1/api/vms/{id}/preview-token',
  summary: "A new preview token for a VM; the old one stops working at once (extension)",
  description:
    "The token opens every private port of the VM: header `X-Agentvm-Preview-Token`, or `?agentvm_token=` on a preview URL, which sets a cookie for that one host and redirects to the URL without it. Only its hash is kept: this is the one time it is shown.",
  tag: 'VMs',
  audience: 'customer',
  mcp: { tool: 'vm_preview_token_rotate' },
  extension: true,
  params: IdParam,
  success: { status: 200, schema: PreviewToken, description: 'The new token' },
  errors: ['not_found'],
  handler: async ({ services, principal, params }) => ({ body: { token: await services.previews.rotateToken(principal.tenantId, params.id) } }),
});
