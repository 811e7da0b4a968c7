/**
 * `images build` (a Dockerfile and the files it copies from a folder, the build's log streamed as it
 * comes, a step counter on a terminal; the exit code says whether it became ready) and `images get`
 * (an image with its packages). list and delete come from the operations' descriptors.
 */
import { Command, Option } from 'commander';
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { call, ClientError, resolveCredentials, type Schemas } from '../client/client.ts';
import { followEventStream } from '../client/eventStream.ts';
import { DockerfileError, filesOfSource, parseDockerfile } from '../domain/dockerfile.ts';
import { apiAction, customerClient } from './apiAction.ts';
import { print, record, table, type Out } from './output.ts';

type Image = Schemas['Image'];

/** Every file under `dir` (relative paths, `/`-separated), leaving out .git and node_modules. */
async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (rel: string) => {
    for (const e of await readdir(path.join(dir, rel), { withFileTypes: true })) {
      if (e.name === '.git' || e.name === 'node_modules') continue;
      const p = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) await walk(p);
      else if (e.isFile()) out.push(p);
    }
  };
  await walk('');
  return out.sort();
}

/** The files of `dir` that the Dockerfile's COPY and ADD steps name, as base64. */
async function buildFiles(dockerfile: string, dir: string): Promise<Record<string, string>> {
  let steps;
  try {
    steps = parseDockerfile(dockerfile).steps;
  } catch (err) {
    if (err instanceof DockerfileError) throw new ClientError('invalid_request', `dockerfile: ${err.message}`);
    throw err;
  }
  const sources = steps.flatMap((s) => (s.kind === 'copy' ? s.sources : []));
  if (sources.length === 0) return {};
  const all = await filesUnder(dir);
  const files: Record<string, string> = {};
  for (const source of sources) {
    for (const f of filesOfSource(source, all)) files[f] ??= (await readFile(path.join(dir, f))).toString('base64');
  }
  return files;
}

export function imagesBuild(cmd: Command): void {
  cmd
    .description('build an image from a Dockerfile: the files its COPY steps name come from DIR; the log streams as the build goes')
    .argument('[dir]', 'the folder COPY and ADD take files from', '.')
    .option('-f, --file <path>', 'the Dockerfile (default: DIR/Dockerfile)')
    .option('--name <name>', "the image's name (default: DIR's name); a rebuild of a name keeps its slug")
    .addOption(new Option('--visibility <visibility>', 'private (default) or public').choices(['private', 'public']))
    .option('--allow <hosts...>', 'what RUN steps may reach (hosts, *.domains or presets such as @debian @npm @pypi @github); default the four presets')
    .option('--no-follow', 'answer the queued image at once')
    .option('--json', 'print the image as JSON at the end (for scripts)')
    .addHelpText('after', '\nExamples:\n  agentvm images build .\n  agentvm images build -f ci/Dockerfile --name team-python --allow @debian @pypi ./ci')
    .action(apiAction(async (dir: string, o: { file?: string; name?: string; visibility?: 'private' | 'public'; allow?: string[]; follow: boolean; json?: boolean }) => {
      const file = o.file ?? path.join(dir, 'Dockerfile');
      const dockerfile = await readFile(file, 'utf8').catch(() => {
        throw new ClientError('invalid_request', `cannot read the Dockerfile ${file}`, 'give its path with -f');
      });
      if (!(await stat(dir).catch(() => null))?.isDirectory()) throw new ClientError('invalid_request', `${dir} is not a folder`);
      const body = {
        name: o.name ?? path.basename(path.resolve(dir)),
        dockerfile,
        files: await buildFiles(dockerfile, dir),
        ...(o.visibility ? { visibility: o.visibility } : {}),
        ...(o.allow ? { egress: { mode: 'allowlist' as const, allow: o.allow } } : {}),
      };
      const api = await customerClient();
      const queued = (await call(api.POST('/v1/api/images', { body }))) as Image;
      if (!o.follow) return print(queued, o, () => record(queued));
      process.stderr.write(`agentvm: building ${queued.image_id} (${queued.slug})\n`);
      const { baseUrl, key } = await resolveCredentials();
      const tty = process.stderr.isTTY;
      const image = await followEventStream<Image>({
        baseUrl,
        key,
        path: `/v1/api/images/${encodeURIComponent(queued.image_id)}/build/events`,
        lostHint: 'the build goes on: `agentvm images get` shows it',
        onEvent: (ev) => {
          const text = (JSON.parse(ev.data) as { text: string }).text;
          const step = /^step (\d+)\/(\d+): /.exec(text);
          // The step counter on a terminal: `[3/7]` before each step's line.
          if (step && tty) process.stderr.write(`\x1b[1m[${step[1]}/${step[2]}]\x1b[0m ${text.slice(step[0].length)}\n`);
          else process.stdout.write(`${text}\n`);
        },
      });
      if (o.json) process.stdout.write(`${JSON.stringify(image, null, 2)}\n`);
      else process.stderr.write(image.status === 'ready' ? `agentvm: ${image.image_id} is ready (${image.slug})\n` : `agentvm: the build failed: ${image.status_reason}\n`);
      if (image.status !== 'ready') process.exitCode = 1;
    }));
}

export function imagesGet(cmd: Command): void {
  cmd
    .description('an image: its status, size and packages with their versions (`base`: the workstation image every VM starts with by default)')
    .argument('<image>', 'an img_ id, a slug, or base')
    .option('--json', 'print JSON (for scripts)')
    .addHelpText('after', '\nExample:\n  agentvm images get base\n  agentvm images get base --json | jq -r \'.packages[] | "\\(.name) \\(.version)"\'')
    .action(apiAction(async (image: string, opts: Out) => {
      const answer = await call((await customerClient()).GET('/v1/api/images/{id}', { params: { path: { id: image } } }));
      print(answer, opts, () => {
        const { packages, ...rest } = answer;
        record(rest);
        table(packages, ['name', 'version']);
      });
    }));
}
