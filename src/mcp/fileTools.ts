/**
 * The MCP tools for a VM's files, written by hand: the files API answers bytes, which a tool cannot
 * pass on as they are. Text comes and goes as text, anything else as base64, up to MCP_FILE_LIMIT
 * (larger files: `agentvm vms cp` or the API). They call the API with the caller's key like every tool.
 */
import { z } from 'zod';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ClientError, type ApiClient } from '../client/client.ts';

/** The largest file a tool reads or writes, in bytes. */
export const MCP_FILE_LIMIT = 4 * 1024 * 1024;
/** The operations these tools stand for (the generated tools leave them out). */
export const FILE_TOOL_OPERATIONS = new Set(['readVMFile', 'writeVMFile']);

const id = z.string().meta({ description: 'A VM id (`vm_…`)' });
const filePath = z
  .string()
  .meta({ description: 'A path on the persist disk: relative paths are under /persist/workspace; absolute ones must be under /persist' });
const encoding = z.enum(['utf8', 'base64']);

type Result = { content: { type: 'text'; text: string }[]; structuredContent?: Record<string, unknown>; isError?: boolean };

const ok = (data: Record<string, unknown>): Result => ({ content: [{ type: 'text', text: JSON.stringify(data, null, 2) }], structuredContent: data });
const fail = (error: string, message: string, hint?: string): Result => ({
  isError: true,
  content: [{ type: 'text', text: JSON.stringify(hint ? { error, message, hint } : { error, message }) }],
});

/** One call of the files API with the caller's key: its status, type and bytes, or the API's error as a tool error. */
async function files(client: () => Promise<ApiClient> | ApiClient, vmId: string, path: string, put?: Uint8Array): Promise<{ type: string; bytes: Uint8Array } | Result> {
  const api = await client();
  const params = { path: { id: vmId }, query: { path } };
  try {
    const r = put
      ? await api.PUT('/v1/api/vms/{id}/files', {
          params,
          body: put as never,
          bodySerializer: (b: unknown) => b as BodyInit,
          headers: { 'content-type': 'application/octet-stream' },
          parseAs: 'arrayBuffer',
        })
      : await api.GET('/v1/api/vms/{id}/files', { params, parseAs: 'arrayBuffer' });
    if (!r.response.ok) {
      // openapi-fetch parses an error's body as JSON whatever `parseAs` says.
      const e = (typeof r.error === 'object' && r.error !== null ? r.error : {}) as { error?: string; message?: string; hint?: string };
      return fail(e.error ?? `http_${r.response.status}`, e.message ?? '', e.hint);
    }
    return { type: r.response.headers.get('content-type') ?? '', bytes: new Uint8Array((r.data ?? new ArrayBuffer(0)) as ArrayBuffer) };
  } catch (err) {
    if (err instanceof ClientError) return fail(err.code, err.message, err.hint);
    return fail('unreachable', `cannot reach the agentvm server (${(err as Error).message})`);
  }
}

const isResult = (x: unknown): x is Result => typeof x === 'object' && x !== null && 'content' in x;

/** Whether bytes are UTF-8 text a person would read (no NUL, decodes cleanly). */
function asText(bytes: Uint8Array): string | null {
  if (bytes.includes(0)) return null;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
}

export function registerFileTools(server: McpServer, client: () => Promise<ApiClient> | ApiClient): void {
  server.registerTool(
    'vm_files_list',
    {
      title: "List a directory on a running VM's persist disk",
      description: "List a directory on a running VM's persist disk: each entry's name, type (file, dir, link), size and mtime.",
      inputSchema: z.object({ id, path: filePath.optional().meta({ description: 'The directory (default: /persist/workspace)' }) }),
      annotations: { title: 'List files', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async (args: { id: string; path?: string }) => {
      const r = await files(client, args.id, args.path ?? '.');
      if (isResult(r)) return r;
      if (!r.type.startsWith('application/json')) return fail('invalid_request', 'path: a file, not a directory', 'read it with vm_file_read');
      return ok(JSON.parse(new TextDecoder().decode(r.bytes)));
    },
  );
  server.registerTool(
    'vm_file_read',
    {
      title: "Read a file on a running VM's persist disk",
      description:
        `Read a file on a running VM's persist disk, up to ${MCP_FILE_LIMIT / 1024 / 1024} MiB: text as text, anything else as base64 ` +
        '(or as asked with `encoding`). Larger files: `agentvm vms cp` or the files API.',
      inputSchema: z.object({ id, path: filePath, encoding: encoding.optional().meta({ description: 'utf8 or base64 (default: utf8 when the file is text)' }) }),
      annotations: { title: 'Read a file', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async (args: { id: string; path: string; encoding?: 'utf8' | 'base64' }) => {
      const r = await files(client, args.id, args.path);
      if (isResult(r)) return r;
      if (r.type.startsWith('application/json')) return fail('invalid_request', 'path: a directory, not a file', 'list it with vm_files_list');
      if (r.bytes.length > MCP_FILE_LIMIT) return fail('payload_too_large', `the file is ${r.bytes.length} bytes; a tool reads at most ${MCP_FILE_LIMIT}`, 'use `agentvm vms cp` or the files API');
      const text = args.encoding === 'base64' ? null : asText(r.bytes);
      if (args.encoding === 'utf8' && text === null) return fail('invalid_request', 'encoding: the file is not UTF-8 text', 'read it with encoding base64');
      return ok({ path: args.path, size: r.bytes.length, encoding: text === null ? 'base64' : 'utf8', content: text ?? Buffer.from(r.bytes).toString('base64') });
    },
  );
  server.registerTool(
    'vm_file_write',
    {
      title: "Write a file on a running VM's persist disk",
      description:
        `Write a file on a running VM's persist disk (up to ${MCP_FILE_LIMIT / 1024 / 1024} MiB), replacing it whole; parent directories are made; ` +
        'it belongs to the user agent. `content` is text, or base64 with `encoding: base64`.',
      inputSchema: z.object({ id, path: filePath, content: z.string(), encoding: encoding.optional().meta({ description: 'How `content` is given (default: utf8)' }) }),
      annotations: { title: 'Write a file', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    async (args: { id: string; path: string; content: string; encoding?: 'utf8' | 'base64' }) => {
      const bytes = args.encoding === 'base64' ? Buffer.from(args.content, 'base64') : Buffer.from(args.content, 'utf8');
      if (bytes.length > MCP_FILE_LIMIT) return fail('payload_too_large', `the content is ${bytes.length} bytes; a tool writes at most ${MCP_FILE_LIMIT}`, 'use `agentvm vms cp` or the files API');
      const r = await files(client, args.id, args.path, bytes);
      if (isResult(r)) return r;
      return ok(JSON.parse(new TextDecoder().decode(r.bytes)));
    },
  );
}
