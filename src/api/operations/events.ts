import { defineOperation } from '../operation.ts';
import { EventList, EventListQuery } from '../schemas.ts';

export const listEvents = defineOperation({
  operationId: 'listEvents',
  method: 'get',
  path: '/v1/api/events',
  summary: "The tenant's events, oldest first after a cursor (extension)",
  description:
    'Each event is written with the change it reports and carries the object as it was then. Page with `after` (the last ' +
    'event_id seen): an empty page means nothing new yet. Events are kept 30 days.',
  tag: 'Events',
  audience: 'customer',
  mcp: { tool: 'events_list' },
  extension: true,
  query: EventListQuery,
  success: { status: 200, schema: EventList, description: 'A page of events' },
  errors: [],
  handler: async ({ services, principal, query }) => ({
    body: (await services.events.list(principal.tenantId, query.after, query.limit)) as never,
  }),
});
