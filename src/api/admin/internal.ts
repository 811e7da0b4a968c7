import { z } from 'zod';
import { defineOperation } from '../operation.ts';
import { idParam } from '../schemas.ts';
import { notFound } from '../../domain/errors.ts';
import { InternalCredentials, type CredentialRow, type HolderKind } from '../../domain/internalCredentials.ts';
import type { Services } from '../../domain/services.ts';

/**
 * The operator's view of the internal endpoint's credentials (decisions.md section 14, README "Security
 * model"): which API replicas and VM hosts hold one, and revoking one. A revoked holder is refused by every
 * host (a replica) or believed by no replica and given no new VMs (a host) until its next start registers
 * it again with a new credential.
 */
const timestamp = z.iso.datetime();
export const InternalCredential = z
  .object({
    credential_id: z.string(),
    holder_kind: z.enum(['host', 'replica']).meta({ description: 'A VM host or an API replica' }),
    holder_id: z.string().meta({ description: 'The host id (`host_…`, its data dir\'s host-id) or the replica id (`rep_…`, its data dir\'s replica-id)' }),
    created_at: timestamp.meta({ description: 'When the holder registered (its last start)' }),
    revoked_at: timestamp.nullable().meta({ description: 'When the operator revoked it; null while it is live' }),
  })
  .meta({ id: 'InternalCredential' });
const InternalCredentialList = z.object({ credentials: z.array(InternalCredential) }).meta({ id: 'InternalCredentialList' });

const present = (row: CredentialRow) => ({
  credential_id: row.credential_id,
  holder_kind: row.holder_kind,
  holder_id: row.holder_id,
  created_at: new Date(row.created_at).toISOString(),
  revoked_at: row.revoked_at ? new Date(row.revoked_at).toISOString() : null,
});

const credentials = (services: Services) => new InternalCredentials(services.db, services.clock);

export const listInternalCredentials = defineOperation({
  operationId: 'adminListInternalCredentials',
  method: 'get',
  path: '/v1/admin/internal-credentials',
  summary: "Every API replica's and VM host's newest internal credential (never its secret)",
  tag: 'Operator',
  audience: 'admin',
  success: { status: 200, schema: InternalCredentialList, description: 'One per holder, live or revoked' },
  errors: [],
  handler: async ({ services }) => ({ body: { credentials: (await credentials(services).list()).map(present) } }),
});

function revoker(kind: HolderKind, path: string, param: 'host_id' | 'replica_id') {
  return defineOperation({
    operationId: kind === 'host' ? 'adminRevokeHostCredential' : 'adminRevokeReplicaCredential',
    method: 'delete',
    path,
    summary: kind === 'host' ? "Revoke a VM host's internal credential" : "Revoke an API replica's internal credential",
    description:
      kind === 'host'
        ? "Replicas stop believing the host's answers at once (its VMs are unreachable through the API) and place no new VMs on it; " +
          'its next start registers it with a new credential.'
        : 'Every VM host refuses the replica within half a second; its next start registers it with a new credential.',
    tag: 'Operator',
    audience: 'admin',
    params: z.strictObject({ [param]: idParam() }),
    success: { status: 200, schema: InternalCredential, description: 'The revoked credential' },
    errors: ['not_found'],
    handler: async ({ services, params }) => {
      const row = await credentials(services).revoke(kind, (params as Record<string, string>)[param]);
      if (!row) throw notFound(kind === 'host' ? 'host with a live credential' : 'replica with a live credential');
      return { body: present(row) };
    },
  });
}

export const revokeHostCredential = revoker('host', '/v1/admin/hosts/{host_id}/credential', 'host_id');
export const revokeReplicaCredential = revoker('replica', '/v1/admin/replicas/{replica_id}/credential', 'replica_id');
