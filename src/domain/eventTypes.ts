/** The kinds of event in a tenant's feed (and what a webhook may ask for). */
export const EVENT_TYPES = [
  'vm.created',
  'vm.running',
  'vm.stopped',
  'vm.failed',
  'vm.deleted',
  'vm.branched',
  'run.finished',
  'template.ready',
  'template.failed',
  'snapshot.created',
  'credits.low',
  'key.issued',
  'key.revoked',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];
