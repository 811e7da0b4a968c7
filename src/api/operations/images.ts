import { defineOperation } from '../operation.ts';
import { Image } from '../schemas.ts';
import { DomainError } from '../../domain/errors.ts';
import type { BaseImageState } from '../../domain/baseImage.ts';

/** The base image in the Image shape (decisions §15): public, its own parent-less root. */
export function presentBaseImage(state: BaseImageState) {
  if (state.status === 'unknown') throw new DomainError('unavailable', `the base image cannot be read here: ${state.reason}`, 'ask again once a VM host is up');
  const ready = state.status === 'ready' ? state.manifest : null;
  return {
    image_id: 'base',
    slug: 'base',
    name: 'base',
    visibility: 'public' as const,
    status: state.status,
    status_reason: state.status === 'failed' ? state.reason : null,
    parent: null,
    size_bytes: ready?.size_bytes ?? null,
    packages: ready?.packages ?? [],
    created_at: ready?.created_at ?? (state as { since: string }).since,
    ready_at: ready?.ready_at ?? null,
  };
}

export const getBaseImage = defineOperation({
  operationId: 'getBaseImage',
  method: 'get',
  path: '/v1/api/images/base',
  summary: 'Get the base image: what every VM starts with, its packages and versions',
  description:
    'The workstation image VMs run unless they name another: Debian 13 with git, curl, wget, ssh, gnupg, sudo (passwordless for the user agent), ' +
    'gcc, g++, make, pkg-config, Python 3 with pip and venv, Node.js with npm, jq, ripgrep, fd, zip, xz, less, procps, iproute2, vim-tiny and nano. ' +
    '`packages` is read from the image the VM host runs (its dpkg database, and npm).',
  tag: 'Images',
  audience: 'customer',
  mcp: { tool: 'image_base_get' },
  extension: true,
  success: { status: 200, schema: Image, description: 'The base image' },
  errors: ['unavailable'],
  handler: async ({ services }) => ({ body: presentBaseImage(await services.baseImage()) }),
});
