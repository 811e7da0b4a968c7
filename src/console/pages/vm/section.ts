import type { Child } from 'hono/jsx';
import type { ApiClient, ClientError, Schemas } from '../../api.ts';
import type { ConsoleContext } from '../../app.tsx';
import type { ConsoleSession } from '../../../domain/sessions.ts';

/** What a section of the VM page is drawn from. */
export interface VmSectionContext {
  vm: Schemas['VM'];
  session: ConsoleSession;
  api: ApiClient;
  c: ConsoleContext;
}

/** A part of the VM page: drawn from the VM, loading what else it shows. */
export type VmSection = (ctx: VmSectionContext) => Promise<Child>;

/** Runs a change and goes where it answers; on the API's refusal, the VM's page again with its message and hint. */
export type VmAct = (c: ConsoleContext, change: () => Promise<string>) => Promise<Response>;

/** The VM's page, with the API's refusal of what was asked at its top. */
export type ShowVm = (c: ConsoleContext, id: string, opts?: { problem?: ClientError; status?: number }) => Promise<Response>;
