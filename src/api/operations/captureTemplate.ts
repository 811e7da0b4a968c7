import { defineOperation } from '../operation.ts';
import { CaptureRequest, IdParam, Template } from '../schemas.ts';
import { presentTemplate } from '../present.ts';

export const captureTemplate = defineOperation({
  operationId: 'captureTemplate',
  method: 'post',
  path: '/v1/api/vms/{id}/capture',
  summary: "Capture a VM's persist disk as a template",
  description: 'Private by default. A public capture scrubs secrets from the copy and reports them in `scrub_report`.',
  tag: 'Templates',
  audience: 'customer',
  mcp: { tool: 'template_capture' },
  cli: { command: 'templates capture', presets: [{ flag: '--public', description: 'publish it in the gallery (--visibility public)', sets: { visibility: 'public' } }], examples: ['agentvm templates capture vm_… --name "my setup"'] },
  params: IdParam,
  body: { schema: CaptureRequest, required: false },
  success: { status: 201, schema: Template, description: 'The new template, capturing' },
  errors: ['not_found', 'vm_not_running', 'quota_exceeded', 'unavailable'],
  handler: async ({ services, principal, params, body }) => ({
    status: 201,
    body: presentTemplate(await services.templates.capture(principal.tenantId, params.id, body ?? {}), principal.tenantId),
  }),
});
