/**
 * The MCP server: one tool per customer operation, its input schema made from the same zod schemas
 * that validate the API, its name and hints from the operation's descriptor (`mcp`), each call made
 * through the typed client with the caller's own key. Served on stdio (`agentvm mcp`) and over
 * streamable HTTP at /v1/mcp.
 */
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { CUSTOMER_OPERATIONS } from '../api/routes.ts';
import { isWrite, type Operation } from '../api/operation.ts';
import { call, ClientError, type ApiClient } from '../client/client.ts';
import { FILE_TOOL_OPERATIONS, registerFileTools } from './fileTools.ts';
import { registerPreviewTools } from './previewTools.ts';

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
  const asyncArg = op.mcp?.asyncArgument;
  if (asyncArg) shape[asyncArg.name] = z.boolean().optional().meta({ description: asyncArg.description });
  if (op.body) {
    const whole = op.mcp?.wholeBody;
    if (whole) shape[whole] = op.body.schema as z.ZodType;
    else for (const [k, v] of Object.entries(shapeOf(op.body.schema))) shape[k] = v;
  }
  return z.object(shape);
}

/** A tool's hints: reads are safe; a write is destructive or idempotent as its descriptor says. */
export function toolAnnotations(op: Operation): ToolAnnotations {
  const readOnly = !isWrite(op);
  return {
    title: op.summary,
    readOnlyHint: readOnly,
    destructiveHint: readOnly ? false : op.mcp?.destructive === true,
    idempotentHint: readOnly || op.mcp?.idempotent === true,
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
    else if (k === op.mcp?.asyncArgument?.name) {
      if (v === false) header.Prefer = 'respond-async';
    }
    else if (k in shapeOf(op.params)) path[k] = v;
    else if (k in shapeOf(op.query)) query[k] = v;
    else if (op.mcp?.wholeBody === k) body = v as Record<string, unknown>;
    else if (body) body[k] = v;
  }
  return { params: { path, query, header }, body };
}

/** A tool's name: its descriptor's, else the operation's own id in snake case (`pauseVM` → `pause_vm`), so a new operation is a tool at once. */
export function toolName(op: Operation): string {
  return op.mcp?.tool ?? op.operationId.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase();
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
        annotations: toolAnnotations(op),
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
