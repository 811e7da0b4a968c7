import { defineOperation } from '../operation.ts';
import { FileListing, FilesQuery, FileWritten, IdParam } from '../schemas.ts';
import { MAX_FILE_BYTES } from '../../domain/guestAccess.ts';

const PATHS =
  'Paths live on the persist disk: a relative path is under `/persist/workspace`, an absolute one must be under `/persist` ' +
  '(`/persist/.agentvm` is the platform\'s own). A path with `..` or NUL, or whose symbolic links lead off the disk, is 400 naming `path`.';

export const readVMFile = defineOperation({
  operationId: 'readVMFile',
  method: 'get',
  path: '/v1/api/vms/{id}/files',
  summary: "Read a file's bytes, or list a directory, on a running VM's persist disk (extension)",
  description: `A file answers its bytes as \`application/octet-stream\` (with Content-Length); a directory answers its entries as JSON. ${PATHS} A path that does not exist is 404.`,
  tag: 'VMs',
  audience: 'customer',
  mcp: { tool: 'vm_file_read' },
  extension: true,
  params: IdParam,
  query: FilesQuery,
  success: {
    status: 200,
    schema: FileListing,
    description: "The file's bytes, or the directory's entries",
    binary: { mediaType: 'application/octet-stream', description: "The file's bytes" },
  },
  errors: ['not_found', 'vm_not_running', 'unavailable'],
  handler: async ({ services, principal, params, query }) => {
    const r = await services.files.read(principal.tenantId, params.id, query.path);
    if (r.kind === 'dir') return { body: { data: r.entries } };
    return { stream: r.body, mediaType: 'application/octet-stream', length: r.size, headers: { 'X-Agentvm-Path': encodeURI(r.path) } };
  },
});

export const writeVMFile = defineOperation({
  operationId: 'writeVMFile',
  method: 'put',
  path: '/v1/api/vms/{id}/files',
  summary: "Write a file on a running VM's persist disk (extension)",
  description:
    `The body is the file's bytes (\`application/octet-stream\`, at most ${MAX_FILE_BYTES / 1024 / 1024} MiB: 413 beyond, with nothing left behind), streamed ` +
    'to the VM as it comes. Missing parent directories are made; the file and they belong to the user `agent`. An existing file is ' +
    'replaced whole, at once, when the last byte has come: an upload cut short leaves the old file (or none), never a part. ' +
      'The 201 comes once the bytes are on the VM\'s disk (fsynced): a VM that dies a moment later keeps the file. ' +
    PATHS,
  tag: 'VMs',
  audience: 'customer',
  mcp: { tool: 'vm_file_write' },
  extension: true,
  params: IdParam,
  query: FilesQuery,
  binaryBody: { mediaType: 'application/octet-stream', maxBytes: MAX_FILE_BYTES, description: "The file's bytes" },
  success: { status: 201, schema: FileWritten, description: 'The file is in place' },
  errors: ['not_found', 'vm_not_running', 'unavailable'],
  handler: async ({ services, principal, params, query, bytes }) => ({
    body: await services.files.write(principal.tenantId, params.id, query.path, bytes!.stream, bytes!.length),
    status: 201,
  }),
});
