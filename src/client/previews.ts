/**
 * A port's preview URL with a credential in it, for the CLI's `vms url` and the MCP tool `vm_port_url`:
 * a new preview token (the VM's earlier one stops working: only its hash is kept, so it cannot be
 * shown again) in `?agentvm_token=`, which the server turns into a cookie for that one host. A public
 * port's URL is the bare one, and no token is made.
 */
import { call, ClientError, type ApiClient } from './client.ts';

export interface PortUrl {
  url: string;
  port: number;
  public: boolean;
  /** The new preview token; null for a public port (no token is made). */
  token: string | null;
}

export async function portUrl(api: ApiClient, vmId: string, port: number): Promise<PortUrl> {
  const ports = await call(api.GET('/v1/api/vms/{id}/ports', { params: { path: { id: vmId } } }));
  const found = ports.data.find((p) => p.port === port);
  if (!found) {
    const open = ports.data.map((p) => p.port).join(', ') || 'none';
    throw new ClientError('port_closed', `nothing listens on port ${port} in ${vmId} (listening: ${open})`, 'start the server in the VM first');
  }
  // A public port needs no token: the VM's own stays as it is (browsers holding its cookie for other ports keep working).
  if (found.public) return { url: found.url, port, public: true, token: null };
  const { token } = await call(api.POST('/v1/api/vms/{id}/preview-token', { params: { path: { id: vmId } } }));
  return { url: `${found.url}?agentvm_token=${encodeURIComponent(token)}`, port, public: false, token };
}

/** The port forward's WebSocket on the API (`agentvm vms forward`): one TCP connection to the port in the VM. */
export const portSocketPath = (vmId: string, port: number) => `/v1/api/vms/${encodeURIComponent(vmId)}/ports/${port}/socket`;
