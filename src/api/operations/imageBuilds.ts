import { z } from 'zod';
import { defineOperation } from '../operation.ts';
import { CreateImageRequest, IdParam, Image, ImageBuildEventStream, ImageList, ImageListQuery } from '../schemas.ts';
import { requestHeader } from '../../http/requestHeader.ts';
import { eventStreamResponse } from '../eventStream.ts';
import { presentBaseImage } from './images.ts';
import type { ImageRow, BuildEvent } from '../../domain/images.ts';

export function presentImage(i: ImageRow): z.input<typeof Image> {
  const ready = i.status === 'ready';
  return {
    image_id: i.image_id,
    slug: i.slug,
    name: i.name,
    visibility: i.visibility,
    status: i.status,
    status_reason: i.status_reason,
    parent: i.parent,
    size_bytes: ready ? Math.round(i.size_bytes) : null,
    packages: ready ? i.packages : [],
    created_at: new Date(i.created_at).toISOString(),
    ready_at: i.ready_at ? new Date(i.ready_at).toISOString() : null,
  };
}

export const createImage = defineOperation({
  operationId: 'createImage',
  method: 'post',
  path: '/v1/api/images',
  summary: 'Build an image of your own from a Dockerfile (extension)',
  description:
    'Answers 202 with the queued image at once; the build runs in a builder VM of yours under the request\'s `egress` (a build FROM base ' +
    'whose first step is not cached takes the one its host keeps ready), each RUN as root ' +
    'unless a USER says otherwise. Follow it with `GET /v1/api/images/{id}/build/events`. A step whose parent and text (and, for COPY, ' +
    'its files) are unchanged is taken from the cache. VMs of the image (`image` on create and fork) start with its root.',
  tag: 'Images',
  audience: 'customer',
  mcp: { tool: 'image_build' },
  write: true,
  extension: true,
  // Up to 16 MiB of files, as base64 (4/3) in JSON, with the Dockerfile.
  body: { schema: CreateImageRequest, required: true, maxBytes: 24 * 1024 * 1024 },
  success: { status: 201, schema: Image, description: 'Not used: the build is asynchronous (202)' },
  alsoAnswers: { status: 202, schema: Image, description: 'The queued image' },
  errors: ['quota_exceeded', 'payload_too_large'],
  handler: async ({ services, principal, body }) => ({ status: 202, body: presentImage(await services.images.create(principal.tenantId, body)) }),
});

export const listImages = defineOperation({
  operationId: 'listImages',
  method: 'get',
  path: '/v1/api/images',
  summary: 'Your images and the public ones, newest first (extension)',
  tag: 'Images',
  audience: 'customer',
  mcp: { tool: 'images_list' },
  cli: { command: 'images list', columns: ['image_id', 'slug', 'name', 'status', 'visibility', 'size_bytes', 'created_at'] },
  extension: true,
  query: ImageListQuery,
  success: { status: 200, schema: ImageList, description: 'One page of images' },
  errors: [],
  handler: async ({ services, principal, query }) => {
    const { rows, total } = await services.images.list(principal.tenantId, query);
    const end = query.offset + rows.length;
    const hasMore = end < total;
    return { body: { data: rows.map(presentImage), total, has_more: hasMore, next_offset: hasMore ? end : null } };
  },
});

export const getImage = defineOperation({
  operationId: 'getImage',
  method: 'get',
  path: '/v1/api/images/{id}',
  summary: 'One image, by id or slug (`base` is the workstation image) (extension)',
  tag: 'Images',
  audience: 'customer',
  mcp: { tool: 'image_get' },
  extension: true,
  params: IdParam,
  success: { status: 200, schema: Image, description: 'The image' },
  errors: ['not_found', 'unavailable'],
  handler: async ({ services, principal, params }) =>
    params.id === 'base' ? { body: presentBaseImage(await services.baseImage()) } : { body: presentImage(await services.images.get(principal.tenantId, params.id)) },
});

export const deleteImage = defineOperation({
  operationId: 'deleteImage',
  method: 'delete',
  path: '/v1/api/images/{id}',
  summary: 'Delete one of your images (extension)',
  description:
    'A 409 `image_in_use` while a VM starts from it or another image is built on it. Its layers stay in its host\'s step cache, where later builds may take them, ' +
    'until no image or VM uses them and no build has taken them for 7 days; then the host removes them.',
  tag: 'Images',
  audience: 'customer',
  mcp: { tool: 'image_delete', destructive: true },
  cli: { command: 'images delete' },
  write: true,
  extension: true,
  params: IdParam,
  success: { status: 200, schema: Image, description: 'The deleted image' },
  errors: ['not_found', 'image_in_use'],
  handler: async ({ services, principal, params }) => ({ body: presentImage(await services.images.delete(principal.tenantId, params.id)) }),
});

function sseFrame(e: BuildEvent): string {
  if (e.type === 'end') return `event: end\ndata: ${JSON.stringify(presentImage(e.image))}\n\n`;
  return `id: ${e.seq}\nevent: log\ndata: ${JSON.stringify({ text: e.text })}\n\n`;
}

export const streamImageBuild = defineOperation({
  operationId: 'streamImageBuild',
  method: 'get',
  path: '/v1/api/images/{id}/build/events',
  summary: "An image build's log as server-sent events, live, then its end (extension)",
  description:
    'Exactly as a run\'s stream: a finished build replays and ends; after a dropped connection send the last `id:` seen as `Last-Event-ID`. ' +
    'A RUN step\'s output (stdout and stderr together) comes line by line while the step runs, each line as soon as it reaches the host; 256 KiB of it per step.',
  tag: 'Images',
  audience: 'customer',
  extension: true,
  params: IdParam,
  headers: z.object({
    'Last-Event-ID': z.string().optional().meta({ description: 'The id of the last event seen: the stream starts after it' }),
  }),
  success: { status: 200, schema: ImageBuildEventStream, description: 'The event stream', contentType: 'text/event-stream' },
  errors: ['not_found', 'quota_exceeded'],
  handler: async ({ c, services, principal, params }) => {
    const { image, after } = await services.images.beginFollowing(principal.tenantId, params.id, requestHeader(c, 'last-event-id'));
    const lease = await services.limits.openStream(principal.tenantId, 'events');
    const response = eventStreamResponse(c, lease, (write, signal) => services.images.follow(image.image_id, after, (e) => write(sseFrame(e)), signal));
    return { body: '', response };
  },
});
