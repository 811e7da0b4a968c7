/**
 * The MCP server: one tool per customer operation, its input schema made from the same zod schemas
 * that validate the API, each call made through the typed client with the caller's own key. Served
 * on stdio (`agentvm mcp`) and over streamable HTTP at /v1/mcp.
 */
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { CUSTOMER_OPERATIONS } from '../api/routes.ts';
import { isWrite, type Operation } from '../api/operation.ts';
import { call, ClientError, type ApiClient } from '../client/client.ts';
import { FILE_TOOL_OPERATIONS, registerFileTools } from './fileTools.ts';
import { registerPreviewTools } from './previewTools.ts';

/** Tool names: the contract's table for the seven it lists, the same style for the rest (see toolName). */
export const TOOL_NAMES: Record<string, string> = {
  whoami: 'whoami',
  listHarnesses: 'harnesses_list',
  getHarness: 'harness_get',
  listVMs: 'vms_list',
  createVM: 'vm_provision',
  getVM: 'vm_get',
  stopVM: 'vm_stop',
  startVM: 'vm_start',
  restartVM: 'vm_restart',
  reprovisionVM: 'vm_reprovision',
  suspendVM: 'vm_suspend',
  waitVM: 'vm_wait',
  runVMTask: 'vm_run',
  listVMRuns: 'runs_list',
  getVMRun: 'run_get',
  cancelVMRun: 'run_cancel',
  destroyVM: 'vm_destroy',
  setVMSecrets: 'vm_secrets_set',
  setVMEgress: 'vm_egress_set',
  listVMEgress: 'vm_egress_log',
  getVMMetrics: 'vm_metrics',
  openVMShell: 'vm_shell_open',
  readVMFile: 'vm_file_read',
  writeVMFile: 'vm_file_write',
  listTemplates: 'templates_list',
  getTemplate: 'template_get',
  forkTemplate: 'template_fork',
  captureTemplate: 'template_capture',
  getBilling: 'billing_get',
  getUsage: 'usage_get',
  getLimits: 'limits_get',
  listKeys: 'keys_list',
  issueKey: 'key_issue',
  revokeKey: 'key_revoke',
  updateVM: 'vm_update',
  listEvents: 'events_list',
  listLedger: 'ledger_list',
  createWebhook: 'webhook_create',
  listWebhooks: 'webhooks_list',
  deleteWebhook: 'webhook_delete',
  listWebhookDeliveries: 'webhook_deliveries_list',
  getBaseImage: 'image_base_get',
  createImage: 'image_build',
  listImages: 'images_list',
  getImage: 'image_get',
  deleteImage: 'image_delete',
  listVMPorts: 'vm_ports',
  setVMPort: 'vm_port_set',
  rotatePreviewToken: 'vm_preview_token_rotate',
};

const DESTRUCTIVE = new Set(['destroyVM', 'revokeKey', 'restartVM', 'reprovisionVM', 'stopVM', 'cancelVMRun', 'deleteWebhook', 'deleteImage']);
const IDEMPOTENT = new Set(['stopVM', 'startVM', 'suspendVM', 'setVMSecrets', 'setVMEgress', 'revokeKey', 'destroyVM', 'cancelVMRun', 'updateVM']);
/** `vm_run` with `wait: false` answers the queued run at once (`Prefer: respond-async`). */
const RUN_WAIT = z.boolean().optional().meta({ description: 'false: answer the queued run at once (follow it with run_get); default true: answer the finished run' });
/** A body that is not an object of fields (the secrets map) goes under this argument. */
const WHOLE_BODY: Record<string, string> = { setVMSecrets: 'secrets' };

type Shape = Record<string, z.ZodType>;
const shapeOf = (schema: unknown): Shape => ((schema as { shape?: Shape } | undefined)?.shape ?? {});

function inputSchema(op: Operation): z.ZodObject {
  const shape: Shape = { ...shapeOf(op.params), ...shapeOf(op.query) };
  if (op.money) {
    shape.idempotency_key = z
      .string()
      .regex(/^[\x21-\x7e]{1,255}$/)
      .optional()
      .meta({ description: 'Retry safely: the first answer for this key is replayed and the charge happens once' });
  }
  if (op.operationId === 'runVMTask') shape.wait = RUN_WAIT;
  if (op.body) {
    const whole = WHOLE_BODY[op.operationId];
    if (whole) shape[whole] = op.body.schema as z.ZodType;
    else for (const [k, v] of Object.entries(shapeOf(op.body.schema))) shape[k] = v;
  }
  return z.object(shape);
}

function annotations(op: Operation): ToolAnnotations {
  const readOnly = !isWrite(op);
  return {
    title: op.summary,
    readOnlyHint: readOnly,
    destructiveHint: readOnly ? false : DESTRUCTIVE.has(op.operationId),
    idempotentHint: readOnly || IDEMPOTENT.has(op.operationId),
    openWorldHint: false,
  };
}

/** Splits the tool's arguments back into the operation's path, query and body. */
function request(op: Operation, args: Record<string, unknown>) {
  const path: Record<string, unknown> = {};
  const query: Record<string, unknown> = {};
  const header: Record<string, string> = {};
  let body: Record<string, unknown> | undefined = op.body ? {} : undefined;
  for (const [k, v] of Object.entries(args)) {
    if (k === 'idempotency_key' && op.money) header['Idempotency-Key'] = String(v);
    else if (k === 'wait' && op.operationId === 'runVMTask') {
      if (v === false) header.Prefer = 'respond-async';
    }
    else if (k in shapeOf(op.params)) path[k] = v;
    else if (k in shapeOf(op.query)) query[k] = v;
    else if (WHOLE_BODY[op.operationId] === k) body = v as Record<string, unknown>;
    else if (body) body[k] = v;
  }
  return { params: { path, query, header }, body };
}

/** A tool's name: the table's, else the operation's own id in snake case (`pauseVM` → `pause_vm`), so a new operation is a tool at once. */
export function toolName(op: Operation): string {
  return TOOL_NAMES[op.operationId] ?? op.operationId.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase();
}

/** Every operation a key can call is a tool, but an event stream (a tool answers once: run_get has the run). */
export function toolOperations(): Operation[] {
  return CUSTOMER_OPERATIONS.filter((op) => op.audience === 'customer' && !op.success.contentType);
}

/** An MCP server whose tools call the API with `client` (which carries the caller's key). */
export function createMcpServer(client: () => Promise<ApiClient> | ApiClient): McpServer {
  const server = new McpServer({ name: 'agentvm', version: '1.0.0' });
  registerFileTools(server, client);
  registerPreviewTools(server, client);
  for (const op of toolOperations().filter((o) => !FILE_TOOL_OPERATIONS.has(o.operationId))) {
    const money = op.money ? ' This tool charges money: the card on file for a plan, prepaid credits for a tier.' : '';
    server.registerTool(
      toolName(op),
      {
        title: op.summary,
        description: `${op.summary}.${op.description ? ` ${op.description}` : ''}${money}`,
        inputSchema: inputSchema(op),
        annotations: annotations(op),
      },
      async (args: Record<string, unknown>) => {
        const api = await client();
        const method = op.method.toUpperCase() as 'GET';
        try {
          const data = await call((api[method] as (p: string, init: unknown) => Promise<{ data?: unknown; error?: unknown; response: Response }>)(op.path, request(op, args ?? {})));
          return { content: [{ type: 'text' as const, text: JSON.stringify(data, null, 2) }], structuredContent: data as Record<string, unknown> };
        } catch (err) {
          if (!(err instanceof ClientError)) throw err;
          const payload: Record<string, string> = { error: err.code, message: err.message };
          if (err.hint) payload.hint = err.hint;
          return { isError: true, content: [{ type: 'text' as const, text: JSON.stringify(payload) }] };
        }
      },
    );
  }
  return server;
}
