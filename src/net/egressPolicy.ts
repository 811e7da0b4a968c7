/**
 * A VM's egress policy as it is stored and handed to its host's gateway: `none` (nothing leaves the
 * VM), `allowlist` (only the names in `allow`), `public` (any public address). domain/egress.ts checks
 * and applies it.
 */
export type EgressMode = 'none' | 'allowlist' | 'public';

export interface EgressPolicy {
  mode: EgressMode;
  allow: string[];
}
