import type { Db } from '../store/db.ts';
import { isUniqueViolation } from '../store/db.ts';
import type { Clock } from './clock.ts';
import { DomainError } from './errors.ts';
import { newId } from './ids.ts';
import type { KeyService } from './keys.ts';

export class TenantService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly keys: KeyService,
  ) {}

  /** Creates a tenant with its first readwrite key, in one transaction. */
  async create(email: string): Promise<{ tenant_id: string; email: string; api_key: string }> {
    const tenantId = newId('ten');
    try {
      return await this.db.transaction(async (tx) => {
        await tx.query('INSERT INTO tenants (tenant_id, email, created_at) VALUES ($1, $2, $3)', [
          tenantId,
          email,
          this.clock.now(),
        ]);
        const { key } = await this.keys.issue(tx, tenantId, { label: 'first key', scope: 'readwrite' });
        return { tenant_id: tenantId, email, api_key: key };
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw new DomainError('conflict', `a tenant with email ${email} already exists`);
      throw err;
    }
  }
}
