import { test } from 'node:test';
import assert from 'node:assert/strict';
import { configAfter, DEFAULT_PATH, inheritedVars, joinWorkdir, parseDockerfile, substitute } from './dockerfile.ts';

test('a Dockerfile reads into steps: continuations, comments, both forms of RUN, ENV pairs, ARG defaults', () => {
  const d = parseDockerfile(`# a workstation for the team
FROM base
ARG PY=3
ENV LANG=C.UTF-8 GREETING="hello world"
ENV OLD style value
RUN apt-get update && \\
    # a comment inside a continuation
    apt-get install -y python\${PY}-dev
RUN ["pip", "install", "requests"]
WORKDIR /srv
WORKDIR app
COPY --chown=agent:agent --chmod=755 tools/ run.sh $LANG/
USER agent
`);
  assert.equal(d.from, 'base');
  assert.deepEqual(d.steps.map((s) => [s.line, s.kind]), [[3, 'arg'], [4, 'env'], [5, 'env'], [6, 'run'], [9, 'run'], [10, 'workdir'], [11, 'workdir'], [12, 'copy'], [13, 'user']]);
  const run = d.steps[3];
  assert.ok(run.kind === 'run' && run.shell);
  assert.deepEqual(run.argv.slice(0, 2), ['/bin/sh', '-c']);
  assert.match(run.argv[2], /apt-get update &&\s+apt-get install -y python\$\{PY\}-dev/, 'RUN is left to the shell, which has the ARGs in its environment');
  const exec = d.steps[4];
  assert.ok(exec.kind === 'run' && !exec.shell);
  assert.deepEqual(exec.argv, ['pip', 'install', 'requests']);
  const env = d.steps[1];
  assert.ok(env.kind === 'env');
  assert.deepEqual(env.vars, [['LANG', 'C.UTF-8'], ['GREETING', 'hello world']]);
  const old = d.steps[2];
  assert.ok(old.kind === 'env');
  assert.deepEqual(old.vars, [['OLD', 'style value']]);
  const copy = d.steps[7];
  assert.ok(copy.kind === 'copy');
  assert.deepEqual([copy.sources, copy.dest, copy.chown, copy.chmod], [['tools/', 'run.sh'], 'C.UTF-8/', 'agent:agent', '755']);
  assert.deepEqual(configAfter({ env: {}, workdir: '/home/agent', user: '' }, d.steps), {
    env: { LANG: 'C.UTF-8', GREETING: 'hello world', OLD: 'style value' },
    workdir: '/srv/app',
    user: 'agent',
  });
});

test('anything a build would not do as written is refused, naming its line', () => {
  const refused: Array<[string, RegExp]> = [
    ['FROM base\nHEALTHCHECK CMD true', /line 2: HEALTHCHECK is not supported$/],
    ['FROM base\nCMD ["sh"]', /line 2: CMD is not supported$/],
    ['FROM base\nFROBNICATE x', /line 2: FROBNICATE is not an instruction$/],
    ['RUN true', /line 1: RUN before FROM$/],
    ['FROM base\nFROM base', /line 2: a second FROM/],
    ['FROM base AS build', /line 1: FROM takes one image/],
    ['FROM base\nADD https://example.com/x.tgz /opt/', /line 2: ADD from a URL is not supported/],
    ['FROM base\nCOPY --from=build /a /b', /line 2: COPY --from is not supported$/],
    ['FROM base\nCOPY ../secret /x', /line 2: COPY source "\.\.\/secret" is outside/],
    ['FROM base\nCOPY /etc/passwd /x', /outside the build's files/],
    ['FROM base\nCOPY onlyone', /line 2: COPY needs a source and a destination$/],
    ['FROM base\nRUN --mount=type=cache,target=/x true', /line 2: RUN options \(--mount=type=cache,target=\/x\) are not supported$/],
    ['FROM base\nENV', /line 2: ENV needs arguments$/],
    ['FROM base\nUSER "a b"', /line 2: USER/],
    ['FROM base\nRUN echo \\', /line 2: the instruction ends in a line continuation/],
    ['# nothing', /has no FROM/],
    ['', /has no FROM/],
  ];
  for (const [text, why] of refused) assert.throws(() => parseDockerfile(text), why, text);
  assert.throws(() => parseDockerfile(`FROM base\n${'RUN true\n'.repeat(10_000)}`), /longer than/);
});

test('variables and working directories resolve as Docker resolves them', () => {
  const vars = new Map([['A', 'x'], ['EMPTY', '']]);
  assert.equal(substitute('$A/${A}/${B:-dflt}/${EMPTY:-e}/$B/\\$A', vars), 'x/x/dflt/e//$A');
  assert.equal(joinWorkdir('/home/agent', 'proj/../src'), '/home/agent/src');
  assert.equal(joinWorkdir('/a', '/b/./c'), '/b/c');
  assert.equal(parseDockerfile('ARG V=img_abc\nFROM $V').from, 'img_abc', 'an ARG before FROM may name the image');
  // `$NAME` before the file's own ENV is the parent image's ENV, over Docker's PATH.
  const env = (text: string, inherited?: Record<string, string>) => parseDockerfile(text, inherited).steps.flatMap((st) => (st.kind === 'env' ? st.vars : []));
  assert.deepEqual(env('FROM base\nENV PATH=/opt/venv/bin:$PATH'), [['PATH', `/opt/venv/bin:${DEFAULT_PATH}`]]);
  const parent = inheritedVars({ APP: '/srv', PATH: '/opt/node/bin:/usr/bin' });
  assert.deepEqual(env('FROM img_x\nENV PATH=/opt/venv/bin:$PATH DIR=$APP/sub', parent), [['PATH', '/opt/venv/bin:/opt/node/bin:/usr/bin'], ['DIR', '/srv/sub']]);
  assert.deepEqual(parseDockerfile('FROM img_x\nWORKDIR $APP/sub', parent).steps.map((st) => (st.kind === 'workdir' ? st.path : '')), ['/srv/sub']);
});
