/**
 * The provider stand-ins' fidelity: what the real harness programs read from their providers (the
 * documented wire of each API, streamed: a tool call, then the final text once its result is in), where
 * each client puts its credential, and each provider's refusal and error shape. The harnesses themselves
 * run against the stand-ins in real VMs (test/egress.test.ts).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_STANDIN_COMMAND, startProviderStandins, type ProviderStandins } from './standins/providers.ts';

interface ServerEvent {
  event?: string;
  data: string;
}

/** Reads a whole SSE answer into its events. */
async function events(res: Response): Promise<ServerEvent[]> {
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
  return (await res.text())
    .split(/\r?\n\r?\n/)
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const ev: ServerEvent = { data: '' };
      for (const line of block.split(/\r?\n/)) {
        if (line.startsWith('event: ')) ev.event = line.slice(7);
        if (line.startsWith('data: ')) ev.data += line.slice(6);
      }
      return ev;
    });
}

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

// The tools as the harnesses declare them, trimmed to what the stand-ins read.
const claudeTools = [
  { name: 'KillShell', input_schema: { type: 'object', properties: { shell_id: { type: 'string' } }, required: ['shell_id'] } },
  {
    name: 'Bash',
    input_schema: { type: 'object', properties: { command: { type: 'string' }, description: { type: 'string' }, timeout: { type: 'number' } }, required: ['command'] },
  },
];
const codexShell = {
  type: 'function',
  name: 'shell',
  parameters: { type: 'object', properties: { command: { type: 'array', items: { type: 'string' } }, workdir: { type: 'string' } }, required: ['command'] },
};
const opencodeBash = {
  type: 'function',
  function: {
    name: 'bash',
    parameters: { type: 'object', properties: { command: { type: 'string' }, description: { type: 'string' }, timeout: { type: 'number' } }, required: ['command', 'description'] },
  },
};
const geminiShell = {
  functionDeclarations: [
    { name: 'read_file', parameters: { type: 'OBJECT', properties: { absolute_path: { type: 'STRING' } } } },
    { name: 'run_shell_command', parameters: { type: 'OBJECT', properties: { command: { type: 'STRING' }, directory: { type: 'STRING' } }, required: ['command'] } },
  ],
};

// Every assert.ok carries a message: without one, Node 20 re-reads this TypeScript source to word the failure and can hang.
describe('provider stand-ins speak each provider\'s wire', () => {
  let s: ProviderStandins;
  before(async () => {
    s = await startProviderStandins();
  });
  after(() => s.close());

  test('Anthropic Messages, streamed: the documented events, input_json_delta that rebuild a Bash tool_use; after its tool_result, "done"', async () => {
    const ask = (messages: unknown[]) =>
      post(`${s.anthropic.url}/v1/messages?beta=true`, { model: 'claude-sonnet-4-5', max_tokens: 1024, messages, tools: claudeTools, stream: true }, { 'x-api-key': 'sk-ant-test' });
    const firstTurn = [{ role: 'user', content: 'prove it' }];
    const evs = await events(await ask(firstTurn));
    const types = evs.map((e) => e.event);
    assert.equal(types[0], 'message_start');
    assert.deepEqual(types.slice(-2), ['message_delta', 'message_stop']);
    for (const e of evs) assert.equal(JSON.parse(e.data).type, e.event);
    const data = evs.map((e) => JSON.parse(e.data));
    const starts = data.filter((d) => d.type === 'content_block_start');
    assert.deepEqual(starts.map((d) => d.content_block.type), ['text', 'tool_use']);
    assert.equal(starts[1].content_block.name, 'Bash');
    assert.match(starts[1].content_block.id, /^toolu_/);
    assert.equal(data.filter((d) => d.type === 'content_block_stop').length, 2);
    const json = data
      .filter((d) => d.type === 'content_block_delta' && d.index === starts[1].index)
      .map((d) => {
        assert.equal(d.delta.type, 'input_json_delta');
        return d.delta.partial_json;
      });
    assert.ok(json.length > 1, 'input arrives in more than one delta');
    assert.equal(JSON.parse(json.join('')).command, DEFAULT_STANDIN_COMMAND);
    assert.equal(data.find((d) => d.type === 'message_delta').delta.stop_reason, 'tool_use');
    assert.ok(data[0].message.usage.input_tokens > 0, 'usage counted');

    const messages = [
      ...firstTurn,
      { role: 'assistant', content: [{ type: 'tool_use', id: starts[1].content_block.id, name: 'Bash', input: { command: 'x' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: starts[1].content_block.id, content: 'brokered-ok' }] },
    ];
    const final = (await events(await ask(messages))).map((e) => JSON.parse(e.data));
    assert.equal(final.filter((d) => d.type === 'content_block_delta').map((d) => d.delta.text).join(''), 'done');
    assert.equal(final.find((d) => d.type === 'message_delta').delta.stop_reason, 'end_turn');
  });

  test('OpenAI Responses, streamed: the documented events in sequence, shell arguments an argv for bash -lc; after its output, "done"', async () => {
    const ask = (input: unknown[]) =>
      post(`${s.openai.baseUrl}/responses`, { model: 'gpt-5-codex', instructions: 'be brief', input, tools: [codexShell], stream: true }, { authorization: 'Bearer sk-openai-test' });
    const firstTurn = [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'prove it' }] }];
    const evs = await events(await ask(firstTurn));
    const data = evs.map((e) => JSON.parse(e.data));
    for (const [i, e] of evs.entries()) {
      assert.equal(data[i].type, e.event);
      assert.equal(data[i].sequence_number, i);
    }
    assert.deepEqual(
      evs.map((e) => e.event).filter((t, i, all) => all[i - 1] !== t),
      [
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        'response.function_call_arguments.delta',
        'response.function_call_arguments.done',
        'response.output_item.done',
        'response.completed',
      ],
    );
    const deltas = data.filter((d) => d.type === 'response.function_call_arguments.delta').map((d) => d.delta);
    assert.ok(deltas.length > 1, 'arguments arrive in more than one delta');
    const done = data.find((d) => d.type === 'response.function_call_arguments.done');
    assert.equal(deltas.join(''), done.arguments);
    assert.deepEqual(JSON.parse(done.arguments), { command: ['bash', '-lc', DEFAULT_STANDIN_COMMAND] });
    const item = data.find((d) => d.type === 'response.output_item.done').item;
    assert.equal(item.type, 'function_call');
    assert.equal(item.name, 'shell');
    assert.match(item.call_id, /^call_/);
    const completed = data.at(-1).response;
    assert.equal(completed.status, 'completed');
    assert.deepEqual(completed.output, [item]);
    assert.ok(completed.usage.total_tokens > 0, 'usage counted');

    const final = (await events(await ask([...firstTurn, item, { type: 'function_call_output', call_id: item.call_id, output: 'brokered-ok' }]))).map((e) => JSON.parse(e.data));
    const types = final.map((d) => d.type);
    for (const t of ['response.content_part.added', 'response.output_text.done', 'response.content_part.done']) assert.ok(types.includes(t), t);
    assert.equal(final.filter((d) => d.type === 'response.output_text.delta').map((d) => d.delta).join(''), 'done');
    assert.deepEqual(final.find((d) => d.type === 'response.output_item.done').item.content, [{ type: 'output_text', text: 'done', annotations: [] }]);
    assert.equal(final.at(-1).type, 'response.completed');
  });

  test('OpenAI Chat Completions, streamed: chunks whose tool_call arguments rebuild the call, a usage chunk when asked, [DONE]; then "done"', async () => {
    const ask = (messages: unknown[]) =>
      post(`${s.openai.baseUrl}/chat/completions`, { model: 'gpt-4.1', messages, tools: [opencodeBash], stream: true, stream_options: { include_usage: true } }, { authorization: 'Bearer sk-chat' });
    const firstTurn = [{ role: 'user', content: 'prove it' }];
    const evs = await events(await ask(firstTurn));
    assert.equal(evs.at(-1)?.data, '[DONE]');
    const chunks = evs.slice(0, -1).map((e) => JSON.parse(e.data));
    for (const c of chunks) assert.equal(c.object, 'chat.completion.chunk');
    const calls = chunks.flatMap((c) => c.choices.flatMap((ch: { delta: { tool_calls?: unknown[] } }) => ch.delta.tool_calls ?? []));
    assert.equal(calls[0].function.name, 'bash');
    assert.match(calls[0].id, /^call_/);
    const args = JSON.parse(calls.map((c) => c.function.arguments).join(''));
    assert.equal(args.command, DEFAULT_STANDIN_COMMAND);
    assert.equal(typeof args.description, 'string', "opencode's required description is filled");
    assert.ok(chunks.some((c) => c.choices[0]?.finish_reason === 'tool_calls'), 'finish_reason tool_calls');
    assert.deepEqual(chunks.at(-1).choices, []);
    assert.ok(chunks.at(-1).usage.total_tokens > 0, 'a usage chunk');

    const afterTool = [
      ...firstTurn,
      { role: 'assistant', content: null, tool_calls: [{ id: calls[0].id, type: 'function', function: { name: 'bash', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: calls[0].id, content: 'brokered-ok' },
    ];
    const final = (await events(await ask(afterTool))).slice(0, -1).map((e) => JSON.parse(e.data)).filter((c) => c.choices.length > 0);
    assert.equal(final.map((c) => c.choices[0].delta.content ?? '').join(''), 'done');
    assert.equal(final.at(-1).choices[0].finish_reason, 'stop');
  });

  test('Gemini: a run_shell_command functionCall; streamGenerateContent?alt=sse after its functionResponse, "done" in chunks, the last with finishReason', async () => {
    const at = (path: string) => `${s.google.url}/v1beta/models/gemini-2.5-pro:${path}`;
    const firstTurn = [{ role: 'user', parts: [{ text: 'prove it' }] }];
    const body = await (await post(at('generateContent'), { contents: firstTurn, tools: [geminiShell] }, { 'x-goog-api-key': 'AIza-test' })).json();
    const cand = body.candidates[0];
    assert.equal(cand.content.role, 'model');
    assert.equal(cand.finishReason, 'STOP');
    assert.deepEqual(cand.content.parts, [{ functionCall: { name: 'run_shell_command', args: { command: DEFAULT_STANDIN_COMMAND } } }]);
    assert.ok(body.usageMetadata.totalTokenCount > 0, 'usage counted');

    const afterTool = [...firstTurn, cand.content, { role: 'user', parts: [{ functionResponse: { name: 'run_shell_command', response: { output: 'brokered-ok' } } }] }];
    const chunks = (await events(await post(`${at('streamGenerateContent')}?alt=sse`, { contents: afterTool, tools: [geminiShell] }, { 'x-goog-api-key': 'AIza-test' }))).map((e) => JSON.parse(e.data));
    assert.ok(chunks.length > 1, 'more than one chunk');
    assert.equal(chunks.map((c) => c.candidates[0].content.parts[0].text).join(''), 'done');
    assert.equal(chunks[0].candidates[0].finishReason, undefined);
    assert.equal(chunks.at(-1).candidates[0].finishReason, 'STOP');
    assert.ok(chunks.at(-1).usageMetadata, 'usage on the last chunk');
  });

  test("unknown paths and bad bodies get each provider's own error shape", async () => {
    const anthropic = await fetch(`${s.anthropic.url}/v1/nothing`);
    assert.equal(anthropic.status, 404);
    assert.match(anthropic.headers.get('content-type') ?? '', /^application\/json/);
    assert.equal((await anthropic.json()).error.type, 'not_found_error');
    const bad = await post(`${s.anthropic.url}/v1/messages`, { messages: 'no' });
    assert.equal(bad.status, 400);
    assert.equal((await bad.json()).error.type, 'invalid_request_error');
    const openai = await fetch(`${s.openai.baseUrl}/embeddings`, { method: 'POST' });
    assert.equal(openai.status, 404);
    assert.equal((await openai.json()).error.code, 'unknown_url');
    const google = await post(`${s.google.url}/v1beta/models/gemini-2.5-pro:embedContent`, {});
    assert.equal(google.status, 404);
    assert.deepEqual(Object.keys((await google.json()).error).sort(), ['code', 'message', 'status']);
  });
});

describe('provider stand-ins with keys', () => {
  test('the credential is read where each client sends it; a wrong one gets the provider\'s refusal, the right one the answer', async () => {
    const s = await startProviderStandins({ keys: { anthropic: 'sk-ant-right', openai: 'sk-openai-right', google: 'AIza-right' } });
    try {
      const body = { model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] };
      const wrong = await post(`${s.anthropic.url}/v1/messages`, body, { 'x-api-key': 'sk-ant-wrong' });
      assert.equal(wrong.status, 401);
      assert.equal((await wrong.json()).error.type, 'authentication_error');
      assert.equal((await post(`${s.anthropic.url}/v1/messages`, body, { 'x-api-key': 'sk-ant-right' })).status, 200);
      assert.equal((await post(`${s.anthropic.url}/v1/messages`, body, { authorization: 'Bearer sk-ant-right' })).status, 200);
      assert.equal((await fetch(`${s.anthropic.url}/api/hello`)).status, 200, 'the connectivity probe needs no key');

      const chat = `${s.openai.baseUrl}/chat/completions`;
      assert.equal((await post(chat, { model: 'm', messages: [] }, { authorization: 'Bearer sk-openai-wrong' })).status, 401);
      assert.equal((await post(chat, { model: 'm', messages: [] }, { authorization: 'Bearer sk-openai-right' })).status, 200);

      const gemini = `${s.google.url}/v1beta/models/g:generateContent`;
      assert.equal((await post(gemini, { contents: [] }, { 'x-goog-api-key': 'AIza-wrong' })).status, 400);
      assert.equal((await post(gemini, { contents: [] }, { 'x-goog-api-key': 'AIza-right' })).status, 200);
      assert.equal((await post(`${gemini}?key=AIza-right`, { contents: [] })).status, 200);
      assert.deepEqual(
        s.seen.filter((r) => r.path !== '/api/hello').map((r) => [r.provider, r.credentialFrom, r.credential, r.status]),
        [
          ['anthropic', 'x-api-key', 'sk-ant-wrong', 401],
          ['anthropic', 'x-api-key', 'sk-ant-right', 200],
          ['anthropic', 'authorization', 'sk-ant-right', 200],
          ['openai', 'authorization', 'sk-openai-wrong', 401],
          ['openai', 'authorization', 'sk-openai-right', 200],
          ['google', 'x-goog-api-key', 'AIza-wrong', 400],
          ['google', 'x-goog-api-key', 'AIza-right', 200],
          ['google', 'query-key', 'AIza-right', 200],
        ],
      );
    } finally {
      await s.close();
    }
  });
});
