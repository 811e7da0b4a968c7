import { call, ClientError, type Schemas } from '../../api.ts';
import type { ConsoleApp, ConsoleContext, ConsoleDeps } from '../../app.tsx';
import { Time, vmPath } from '../../components.tsx';
import { bytes } from '../../format.ts';
import { Field, PostForm, Submit } from '../../form.tsx';
import { SectionProblem } from '../../problem.tsx';
import { Table, type Column } from '../../table.tsx';
import { SECURITY_HEADERS } from '../../security.ts';
import type { ConsoleSession } from '../../../domain/sessions.ts';
import type { VmAct, VmSectionContext } from './section.ts';
import { MAX_FILE_BYTES } from '../../../domain/guestAccess.ts';

/**
 * A form upload without script arrives as multipart, which is read whole before it can be parsed: the console
 * takes at most this much that way. With script (console.js), the file's bytes are streamed to the VM as they
 * come, up to the API's own limit.
 */
export const FORM_UPLOAD_MAX_BYTES = 8 * 1024 * 1024;
const IN_PROCESS = 'http://agentvm.internal';

/** A directory under /persist/workspace as the console names it: '' for the workspace, else 'a/b' (no '..'). */
export function cleanDir(raw: string | undefined): string {
  const parts = (raw ?? '').split('/').filter((p) => p && p !== '.');
  return parts.includes('..') ? '' : parts.join('/');
}
const join = (dir: string, name: string) => (dir ? `${dir}/${name}` : name);
const filesHref = (vmId: string, dir: string) => `${vmPath(vmId)}${dir ? `?dir=${encodeURIComponent(dir)}` : ''}#files-h`;
const downloadHref = (vmId: string, path: string) => `${vmPath(vmId)}/files/download?path=${encodeURIComponent(path)}`;

/** The VM page's files section: /persist/workspace and below, with downloads and an upload form. */
const columns = (vmId: string, dir: string): Column<Schemas['FileEntry']>[] => [
  {
    label: 'Name',
    class: 'wrap-anywhere',
    cell: (e) =>
      e.type === 'dir' ? (
        <a href={filesHref(vmId, join(dir, e.name))}>{e.name}/</a>
      ) : e.type === 'file' ? (
        <a href={downloadHref(vmId, join(dir, e.name))} download={e.name}>
          {e.name}
        </a>
      ) : (
        <span>
          {e.name} <span class="muted small">(link)</span>
        </span>
      ),
  },
  { label: 'Size', cell: (e) => (e.type === 'file' ? bytes(e.size) : '—') },
  { label: 'Modified', cell: (e) => <Time at={e.mtime} /> },
];

export async function FilesSection({ vm, session, api, c }: VmSectionContext) {
  const dir = cleanDir(c.req.query('dir'));
  let entries: Schemas['FileEntry'][] | null = null;
  let problem: ClientError | null = null;
  if (vm.status === 'running') {
    try {
      const listing = await call(api.GET('/v1/api/vms/{id}/files', { params: { path: { id: vm.vm_id }, query: { path: dir || '.' } } }));
      entries = (listing as Schemas['FileListing']).data;
    } catch (err) {
      if (!(err instanceof ClientError)) throw err;
      problem = err;
    }
  }
  const crumbs = dir ? dir.split('/') : [];
  return (
    <section class="card stack" aria-labelledby="files-h" id="files">
      <div class="section-head">
        <h2 id="files-h">Files</h2>
        <nav class="crumbs path-crumbs" aria-label="Folder">
          <a href={filesHref(vm.vm_id, '')} aria-current={dir ? undefined : 'location'}>
            /persist/workspace
          </a>
          {crumbs.map((name, i) => (
            <>
              <span aria-hidden="true">/</span>
              <a href={filesHref(vm.vm_id, crumbs.slice(0, i + 1).join('/'))} aria-current={i === crumbs.length - 1 ? 'location' : undefined}>
                {name}
              </a>
            </>
          ))}
        </nav>
      </div>
      {vm.status !== 'running' ? (
        <p class="empty">The files are on the persist disk; they can be seen while the VM is running.</p>
      ) : problem ? (
        <SectionProblem problem={problem} fallback="The files could not be read." />
      ) : entries && entries.length === 0 ? (
        <p class="empty">This folder is empty.</p>
      ) : (
        <Table
          id="file-rows"
          caption={`Files in /persist/workspace${dir ? `/${dir}` : ''}`}
          columns={columns(vm.vm_id, dir)}
          rows={entries ?? []}
          lead={
            dir ? (
              <tr>
                <td data-label="Name">
                  <a href={filesHref(vm.vm_id, crumbs.slice(0, -1).join('/'))}>.. (up)</a>
                </td>
                <td data-label="Size"></td>
                <td data-label="Modified"></td>
              </tr>
            ) : null
          }
        />
      )}
      {vm.status === 'running' ? (
        <PostForm session={session} action={`${vmPath(vm.vm_id)}/files/upload`} class="grid-secret" enctype="multipart/form-data" data-stream-upload="" hidden={{ dir }}>
          <Field id="upload-file" label="Upload a file to this folder">
            <input id="upload-file" name="file" type="file" required aria-describedby="upload-help" />
          </Field>
          <Field id="upload-name" label="Save as (optional)">
            <input id="upload-name" name="name" maxlength={255} placeholder="the file's own name" autocomplete="off" />
          </Field>
          <div class="field end">
            <Submit label="Upload" variant="primary" />
          </div>
          <p id="upload-help" class="muted small span-all">
            Up to {bytes(MAX_FILE_BYTES)}, streamed to the VM ({bytes(FORM_UPLOAD_MAX_BYTES)} with scripts off). A file of the same name is replaced whole once the last byte has come.
          </p>
        </PostForm>
      ) : null}
    </section>
  );
}

/** A file name fit for Content-Disposition: its own name, with anything odd replaced. */
const asciiName = (name: string) => name.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 200) || 'download';

export function registerFiles(app: ConsoleApp, deps: ConsoleDeps, act: VmAct) {
  /** A call to the files operation in process, as the session's tenant, whose answer is passed on as it streams. */
  const filesCall = (c: ConsoleContext, id: string, path: string, init: RequestInit = {}) =>
    deps.callApi(
      new Request(`${IN_PROCESS}/v1/api/vms/${encodeURIComponent(id)}/files?path=${encodeURIComponent(path)}`, init),
      (c.get('session') as ConsoleSession).principal,
    );

  const problemOf = async (res: Response) => {
    const body = (await res.json().catch(() => ({}))) as { error?: string; message?: string; hint?: string };
    return new ClientError(body.error ?? 'internal', body.message ?? '', body.hint, res.status);
  };

  app.get('/vms/:id/files/download', async (c) => {
    const path = c.req.query('path') ?? '';
    const res = await filesCall(c, c.req.param('id')!, path);
    if (!res.ok) throw await problemOf(res);
    if (!(res.headers.get('content-type') ?? '').startsWith('application/octet-stream')) {
      throw new ClientError('invalid_request', 'that is a folder, not a file', 'open it from the files list', 400);
    }
    const name = path.split('/').filter(Boolean).at(-1) ?? 'download';
    const headers: Record<string, string> = {
      ...SECURITY_HEADERS,
      'Content-Type': 'application/octet-stream',
      'Content-Disposition': `attachment; filename="${asciiName(name)}"; filename*=UTF-8''${encodeURIComponent(name)}`,
      'Cache-Control': 'no-store',
    };
    const length = res.headers.get('content-length');
    if (length) headers['Content-Length'] = length;
    return new Response(res.body, { status: 200, headers });
  });

  /**
   * An upload: the raw bytes (console.js sends the file as the body, with the path in the query and the CSRF
   * token in a header: streamed to the VM as they come), or a plain form's multipart body (read whole, so capped).
   * Either way it lands in the folder shown, under the name given or the file's own.
   */
  app.post('/vms/:id/files/upload', (c) => act(c, () => upload(c)));
  /** Sends the file to the VM; answers where to go next. */
  const upload = async (c: ConsoleContext): Promise<string> => {
    const id = c.req.param('id')!;
    const back = (dir: string, done: string) => `${vmPath(id)}?${new URLSearchParams({ ...(dir ? { dir } : {}), done })}#files-h`;
    const type = (c.req.header('content-type') ?? '').split(';')[0].trim().toLowerCase();
    let dir: string;
    let name: string;
    let body: ReadableStream<Uint8Array> | null;
    let length: string | undefined;
    if (type === 'application/octet-stream') {
      dir = cleanDir(c.req.query('dir'));
      name = (c.req.query('name') ?? '').trim();
      body = c.req.raw.body;
      length = c.req.header('content-length');
    } else {
      const declared = Number(c.req.header('content-length') ?? 'NaN');
      if (!(declared <= FORM_UPLOAD_MAX_BYTES + 64 * 1024)) {
        throw new ClientError(
          'payload_too_large',
          `a form upload without script is at most ${bytes(FORM_UPLOAD_MAX_BYTES)}`,
          `turn scripts on for uploads up to ${bytes(MAX_FILE_BYTES)}, or use \`agentvm vms cp\``,
          413,
        );
      }
      const form = await c.req.parseBody();
      const file = form.file;
      dir = cleanDir(typeof form.dir === 'string' ? form.dir : '');
      const given = typeof form.name === 'string' ? form.name.trim() : '';
      if (!(file instanceof File)) throw new ClientError('invalid_request', 'file: choose a file to upload', undefined, 400);
      name = given || file.name;
      body = file.stream();
      length = String(file.size);
    }
    if (!name || name.includes('/') || name === '.' || name === '..') {
      throw new ClientError('invalid_request', 'name: a file name, without "/"', 'leave it empty to keep the file\'s own name', 400);
    }
    const res = await filesCall(c, id, join(dir, name), {
      method: 'PUT',
      body: body ?? new Uint8Array(0),
      headers: { 'content-type': 'application/octet-stream', ...(length ? { 'content-length': length } : {}) },
      duplex: 'half',
    } as RequestInit);
    if (!res.ok) throw await problemOf(res);
    return back(dir, 'uploaded');
  };
}
