/**
 * The MCP tool `vm_port_url`: a port's preview URL with a new preview token in it, a link the user
 * opens in a browser (client/previews.ts). `vm_ports` is the listVMPorts operation's own tool.
 */
import { z } from 'zod';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ClientError, type ApiClient } from '../client/client.ts';
import { portUrl } from '../client/previews.ts';

export function registerPreviewTools(server: McpServer, client: () => Promise<ApiClient> | ApiClient): void {
  server.registerTool(
    'vm_port_url',
    {
      title: "A port's preview URL with a token in it",
      description:
        "A link to a port a server in the VM listens on, to open in a browser: its preview URL with a new preview token in it " +
        "(the VM's earlier token stops working), or the bare URL of a public port. See vm_ports for what listens.",
      inputSchema: z.object({
        id: z.string().meta({ description: 'A VM id (`vm_…`)' }),
        port: z.int().min(1).max(65535).meta({ description: 'The TCP port in the VM' }),
      }),
      annotations: { title: 'Preview URL', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    },
    async (args: { id: string; port: number }) => {
      try {
        const r = await portUrl(await client(), args.id, args.port);
        return { content: [{ type: 'text' as const, text: JSON.stringify(r, null, 2) }], structuredContent: r as unknown as Record<string, unknown> };
      } catch (err) {
        if (!(err instanceof ClientError)) throw err;
        const payload: Record<string, string> = { error: err.code, message: err.message };
        if (err.hint) payload.hint = err.hint;
        return { isError: true, content: [{ type: 'text' as const, text: JSON.stringify(payload) }] };
      }
    },
  );
}
