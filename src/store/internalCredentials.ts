/**
 * The `internal_credentials` table: each API replica's and VM host's credential for the internal
 * endpoint, only its SHA-256 kept; and what a host checks of a VM before it touches it (that the VM's row
 * places it there).
 */
import type { Queryable } from './db.ts';

export type HolderKind = 'host' | 'replica';

export interface CredentialRow {
  credential_id: string;
  holder_kind: HolderKind;
  holder_id: string;
  created_at: Date;
  revoked_at: Date | null;
}

const COLUMNS = 'credential_id, holder_kind, holder_id, created_at, revoked_at';

/** Revokes the holder's live credential (if any), then records the new one: a holder has one live credential. */
export async function replace(q: Queryable, row: Omit<CredentialRow, 'revoked_at'> & { secret_hash: string }): Promise<void> {
  await revoke(q, row.holder_kind, row.holder_id, row.created_at);
  await q.query(
    'INSERT INTO internal_credentials (credential_id, holder_kind, holder_id, secret_hash, created_at) VALUES ($1, $2, $3, $4, $5)',
    [row.credential_id, row.holder_kind, row.holder_id, row.secret_hash, row.created_at],
  );
}

/** The holder of a live credential with this hash. */
export async function findLive(q: Queryable, secretHash: string): Promise<CredentialRow | undefined> {
  const [row] = await q.query<CredentialRow>(`SELECT ${COLUMNS} FROM internal_credentials WHERE secret_hash = $1 AND revoked_at IS NULL`, [secretHash]);
  return row;
}

/** Revokes the holder's live credential; answers it, or undefined when it has none. */
export async function revoke(q: Queryable, kind: HolderKind, holderId: string, now: Date): Promise<CredentialRow | undefined> {
  const [row] = await q.query<CredentialRow>(
    `UPDATE internal_credentials SET revoked_at = $3 WHERE holder_kind = $1 AND holder_id = $2 AND revoked_at IS NULL RETURNING ${COLUMNS}`,
    [kind, holderId, now],
  );
  return row;
}

/** Every holder's newest credential, live or revoked. */
export function listNewest(q: Queryable): Promise<CredentialRow[]> {
  return q.query<CredentialRow>(
    `SELECT DISTINCT ON (holder_kind, holder_id) ${COLUMNS} FROM internal_credentials
     ORDER BY holder_kind, holder_id, created_at DESC, credential_id`,
  );
}

/** The host a VM's row places it on (undefined: no such VM). */
export async function hostOfVm(q: Queryable, vmId: string): Promise<string | null | undefined> {
  const [row] = await q.query<{ host_id: string | null }>('SELECT host_id FROM vms WHERE vm_id = $1', [vmId]);
  return row ? row.host_id : undefined;
}

/** The host of a template's source VM (where its capture runs). */
export async function hostOfTemplate(q: Queryable, templateId: string): Promise<string | null | undefined> {
  const [row] = await q.query<{ host_id: string | null }>(
    'SELECT v.host_id FROM templates t JOIN vms v ON v.vm_id = t.source_vm_id WHERE t.template_id = $1',
    [templateId],
  );
  return row ? row.host_id : undefined;
}

/** The host that holds a snapshot's files. */
export async function hostOfSnapshot(q: Queryable, snapshotId: string): Promise<string | undefined> {
  const [row] = await q.query<{ host_id: string }>('SELECT host_id FROM snapshots WHERE snapshot_id = $1', [snapshotId]);
  return row?.host_id;
}

/** Where an API replica reaches a host, and the hash of the host's live credential (null: none). */
export interface HostEndpoint {
  host_id: string;
  internal_url: string | null;
  credential_hash: string | null;
}

const ENDPOINT = `SELECT h.host_id, h.internal_url, c.secret_hash AS credential_hash FROM hosts h
  LEFT JOIN internal_credentials c ON c.holder_kind = 'host' AND c.holder_id = h.host_id AND c.revoked_at IS NULL`;

/** The host a VM is placed on. */
export async function endpointOfVm(q: Queryable, vmId: string): Promise<HostEndpoint | undefined> {
  const [row] = await q.query<HostEndpoint>(`${ENDPOINT} JOIN vms v ON v.host_id = h.host_id WHERE v.vm_id = $1`, [vmId]);
  return row;
}

/** A host by its id. */
export async function endpointOfHost(q: Queryable, hostId: string): Promise<HostEndpoint | undefined> {
  const [row] = await q.query<HostEndpoint>(`${ENDPOINT} WHERE h.host_id = $1`, [hostId]);
  return row;
}

/** The host of a template's source VM (where its capture runs). */
export async function endpointOfTemplate(q: Queryable, templateId: string): Promise<HostEndpoint | undefined> {
  const [row] = await q.query<HostEndpoint>(
    `${ENDPOINT} JOIN vms v ON v.host_id = h.host_id JOIN templates t ON t.source_vm_id = v.vm_id WHERE t.template_id = $1`,
    [templateId],
  );
  return row;
}
