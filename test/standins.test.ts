import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  DEFAULT_STANDIN_COMMAND,
  startEchoHost,
  startProviderStandins,
  type ProviderStandins,
  type SeenRequest,
} from './standins/providers.ts';

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

/** The last request the stand-ins saw at this path. */
function lastAt(s: ProviderStandins, path: string): SeenRequest {
  const hit = [...s.seen].reverse().find((r) => r.path === path);
  assert.ok(hit, `no request seen at ${path}`);
  return hit;
}

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
const codexExec = {
  type: 'function',
  name: 'exec_command',
  parameters: { type: 'object', properties: { cmd: { type: 'string' }, yield_time_ms: { type: 'number' } }, required: ['cmd'] },
};
const codexStdin = { type: 'function', name: 'write_stdin', parameters: { type: 'object', properties: { chars: { type: 'string' } } } };
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
describe('provider stand-ins', () => {
  let s: ProviderStandins;
  before(async () => {
    s = await startProviderStandins();
  });
  after(() => s.close());

  test('each provider listens on its own loopback port; OpenAI\'s base URL carries /v1', () => {
    for (const p of [s.anthropic, s.openai, s.google]) assert.match(p.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.equal(new Set([s.anthropic.url, s.openai.url, s.google.url]).size, 3);
    assert.equal(s.openai.baseUrl, `${s.openai.url}/v1`);
    assert.equal(s.anthropic.baseUrl, s.anthropic.url);
  });

  describe('Anthropic Messages', () => {
    const ask = (body: Record<string, unknown>, headers: Record<string, string> = { 'x-api-key': 'sk-ant-test' }) =>
      post(`${s.anthropic.url}/v1/messages?beta=true`, { model: 'claude-sonnet-4-5', max_tokens: 1024, ...body }, headers);
    const firstTurn = [{ role: 'user', content: 'prove it' }];

    test('offered Bash and no tool result yet: a tool_use of Bash running the command; the key and body are recorded', async () => {
      const res = await ask({ messages: firstTurn, tools: claudeTools });
      assert.equal(res.status, 200);
      const msg = await res.json();
      assert.equal(msg.type, 'message');
      assert.equal(msg.stop_reason, 'tool_use');
      const use = msg.content.find((b: { type: string }) => b.type === 'tool_use');
      assert.equal(use.name, 'Bash');
      assert.equal(use.input.command, DEFAULT_STANDIN_COMMAND);
      assert.match(use.id, /^toolu_/);
      assert.match(DEFAULT_STANDIN_COMMAND, /brokered-ok > \/persist\/workspace\/standin-proof\.txt/);

      const seen = lastAt(s, '/v1/messages');
      assert.equal(seen.provider, 'anthropic');
      assert.equal(seen.method, 'POST');
      assert.deepEqual(seen.query, { beta: 'true' });
      assert.equal(seen.credential, 'sk-ant-test');
      assert.equal(seen.credentialFrom, 'x-api-key');
      assert.deepEqual((seen.body as { messages: unknown }).messages, firstTurn);
      assert.equal(seen.status, 200);
    });

    test('streamed: the documented event sequence, text_delta and input_json_delta that rebuild the tool input', async () => {
      const evs = await events(await ask({ messages: firstTurn, tools: claudeTools, stream: true }));
      const types = evs.map((e) => e.event);
      assert.equal(types[0], 'message_start');
      assert.deepEqual(types.slice(-2), ['message_delta', 'message_stop']);
      for (const e of evs) assert.equal(JSON.parse(e.data).type, e.event);
      const data = evs.map((e) => JSON.parse(e.data));
      const starts = data.filter((d) => d.type === 'content_block_start');
      assert.deepEqual(starts.map((d) => d.content_block.type), ['text', 'tool_use']);
      assert.equal(data.filter((d) => d.type === 'content_block_stop').length, 2);
      const toolIndex = starts[1].index;
      const json = data
        .filter((d) => d.type === 'content_block_delta' && d.index === toolIndex)
        .map((d) => {
          assert.equal(d.delta.type, 'input_json_delta');
          return d.delta.partial_json;
        });
      assert.ok(json.length > 1, 'input arrives in more than one delta');
      assert.equal(JSON.parse(json.join('')).command, DEFAULT_STANDIN_COMMAND);
      assert.ok(data.some((d) => d.type === 'content_block_delta' && d.delta.type === 'text_delta'), 'a text_delta');
      assert.equal(data.find((d) => d.type === 'message_delta').delta.stop_reason, 'tool_use');
      assert.equal(data[0].message.usage.input_tokens > 0, true);
    });

    test('once a tool_result is in the conversation: the final text "done", streamed and not', async () => {
      const messages = [
        ...firstTurn,
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'Bash', input: { command: 'x' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'brokered-ok' }] },
      ];
      const msg = await (await ask({ messages, tools: claudeTools })).json();
      assert.equal(msg.stop_reason, 'end_turn');
      assert.deepEqual(msg.content, [{ type: 'text', text: 'done' }]);

      const data = (await events(await ask({ messages, tools: claudeTools, stream: true }))).map((e) => JSON.parse(e.data));
      const text = data.filter((d) => d.type === 'content_block_delta').map((d) => d.delta.text).join('');
      assert.equal(text, 'done');
      assert.equal(data.find((d) => d.type === 'message_delta').delta.stop_reason, 'end_turn');
    });

    test('a side request without tools gets a short text; an OAuth bearer token is recorded as the credential', async () => {
      const msg = await (await ask({ messages: [{ role: 'user', content: 'title this' }] }, { authorization: 'Bearer sk-ant-oat-1' })).json();
      assert.deepEqual(msg.content, [{ type: 'text', text: 'ok' }]);
      const seen = lastAt(s, '/v1/messages');
      assert.equal(seen.credential, 'sk-ant-oat-1');
      assert.equal(seen.credentialFrom, 'authorization');
    });

    test('count_tokens, models, and claude-code\'s start-up calls answer; unknown paths are 404 in the error shape', async () => {
      const count = await post(`${s.anthropic.url}/v1/messages/count_tokens?beta=true`, { model: 'm', messages: firstTurn });
      assert.equal(count.status, 200);
      assert.ok((await count.json()).input_tokens > 0, 'a token count');
      const models = await (await fetch(`${s.anthropic.url}/v1/models`)).json();
      assert.ok(models.data.length > 0, 'some models');
      assert.equal((await (await fetch(`${s.anthropic.url}/v1/models/claude-x`)).json()).id, 'claude-x');
      assert.equal((await fetch(`${s.anthropic.url}/api/hello`, { method: 'HEAD' })).status, 200);
      assert.equal((await post(`${s.anthropic.url}/api/event_logging/batch`, { events: [] })).status, 200);
      const metrics = await (await fetch(`${s.anthropic.url}/api/claude_code/organizations/metrics_enabled`)).json();
      assert.equal(metrics.metrics_logging_enabled, false);

      const missing = await fetch(`${s.anthropic.url}/v1/nothing`);
      assert.equal(missing.status, 404);
      assert.match(missing.headers.get('content-type') ?? '', /^application\/json/);
      assert.deepEqual((await missing.json()).error.type, 'not_found_error');
      assert.equal(lastAt(s, '/v1/nothing').status, 404);
      const bad = await post(`${s.anthropic.url}/v1/messages`, { messages: 'no' });
      assert.equal(bad.status, 400);
      assert.equal((await bad.json()).error.type, 'invalid_request_error');
    });
  });

  describe('OpenAI Responses', () => {
    const ask = (body: Record<string, unknown>) =>
      post(`${s.openai.baseUrl}/responses`, { model: 'gpt-5-codex', instructions: 'be brief', ...body }, { authorization: 'Bearer sk-openai-test' });
    const firstTurn = [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'prove it' }] }];

    test('streamed, with codex\'s shell tool: the documented events, arguments as an argv for bash -lc', async () => {
      const evs = await events(await ask({ input: firstTurn, tools: [codexShell], stream: true }));
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

      const seen = lastAt(s, '/v1/responses');
      assert.equal(seen.provider, 'openai');
      assert.equal(seen.credential, 'sk-openai-test');
      assert.equal(seen.credentialFrom, 'authorization');
    });

    test('with exec_command beside write_stdin: exec_command with {cmd}', async () => {
      const res = await (await ask({ input: firstTurn, tools: [codexStdin, codexExec] })).json();
      assert.equal(res.object, 'response');
      assert.equal(res.output[0].name, 'exec_command');
      assert.deepEqual(JSON.parse(res.output[0].arguments), { cmd: DEFAULT_STANDIN_COMMAND });
    });

    test("codex's code mode (a JavaScript `exec` tool over nested tools, offered in an input item): a custom_tool_call calling exec_command", async () => {
      const exec = { type: 'custom', name: 'exec', description: 'Run JavaScript code to orchestrate tool calls. declare const tools: { exec_command(args: { cmd: string }): Promise<{ output: string }> };', format: { type: 'grammar' } };
      const input = [{ type: 'additional_tools', role: 'developer', tools: [{ type: 'namespace', name: 'functions', tools: [exec] }] }, ...firstTurn];
      const evs = await events(await ask({ input, stream: true }));
      const data = evs.map((e) => JSON.parse(e.data));
      const deltas = data.filter((d) => d.type === 'response.custom_tool_call_input.delta').map((d) => d.delta);
      const item = data.find((d) => d.type === 'response.output_item.done').item;
      assert.equal(item.type, 'custom_tool_call');
      assert.equal(item.name, 'exec');
      assert.equal(deltas.join(''), item.input);
      assert.ok(item.input.includes(`tools.exec_command({ cmd: ${JSON.stringify(DEFAULT_STANDIN_COMMAND)} })`), item.input);
      const after = await (await ask({ input: [...input, { type: 'custom_tool_call_output', call_id: item.call_id, output: 'brokered-ok' }] })).json();
      assert.equal(after.output[0].content[0].text, 'done');
    });

    test('with the built-in local_shell: a local_shell_call exec action', async () => {
      const res = await (await ask({ input: firstTurn, tools: [{ type: 'local_shell' }] })).json();
      assert.equal(res.output[0].type, 'local_shell_call');
      assert.deepEqual(res.output[0].action.command, ['bash', '-lc', DEFAULT_STANDIN_COMMAND]);
    });

    test('once a function_call_output is in the input: a message "done" through output_text deltas', async () => {
      const input = [
        ...firstTurn,
        { type: 'function_call', call_id: 'call_1', name: 'shell', arguments: '{}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'brokered-ok' },
      ];
      const data = (await events(await ask({ input, tools: [codexShell], stream: true }))).map((e) => JSON.parse(e.data));
      const types = data.map((d) => d.type);
      for (const t of ['response.content_part.added', 'response.output_text.done', 'response.content_part.done']) assert.ok(types.includes(t), t);
      assert.equal(data.filter((d) => d.type === 'response.output_text.delta').map((d) => d.delta).join(''), 'done');
      const item = data.find((d) => d.type === 'response.output_item.done').item;
      assert.deepEqual(item.content, [{ type: 'output_text', text: 'done', annotations: [] }]);
      assert.equal(data.at(-1).type, 'response.completed');
    });
  });

  describe('OpenAI Chat Completions and models', () => {
    const ask = (body: Record<string, unknown>) =>
      post(`${s.openai.baseUrl}/chat/completions`, { model: 'gpt-4.1', ...body }, { authorization: 'Bearer sk-chat' });
    const firstTurn = [{ role: 'user', content: 'prove it' }];
    const afterTool = [
      ...firstTurn,
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'bash', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'brokered-ok' },
    ];

    test('not streamed: tool_calls for opencode\'s bash (its required description filled), then "done"', async () => {
      const first = await (await ask({ messages: firstTurn, tools: [opencodeBash] })).json();
      assert.equal(first.object, 'chat.completion');
      assert.equal(first.choices[0].finish_reason, 'tool_calls');
      const call = first.choices[0].message.tool_calls[0];
      assert.equal(call.function.name, 'bash');
      const args = JSON.parse(call.function.arguments);
      assert.equal(args.command, DEFAULT_STANDIN_COMMAND);
      assert.equal(typeof args.description, 'string');

      const second = await (await ask({ messages: afterTool, tools: [opencodeBash] })).json();
      assert.equal(second.choices[0].finish_reason, 'stop');
      assert.equal(second.choices[0].message.content, 'done');
      assert.ok(second.usage.total_tokens > 0, 'usage counted');
    });

    test('streamed: chunks whose tool_call arguments rebuild the call, a usage chunk when asked, then [DONE]', async () => {
      const evs = await events(await ask({ messages: firstTurn, tools: [opencodeBash], stream: true, stream_options: { include_usage: true } }));
      assert.equal(evs.at(-1)?.data, '[DONE]');
      const chunks = evs.slice(0, -1).map((e) => JSON.parse(e.data));
      for (const c of chunks) assert.equal(c.object, 'chat.completion.chunk');
      const calls = chunks.flatMap((c) => c.choices.flatMap((ch: { delta: { tool_calls?: unknown[] } }) => ch.delta.tool_calls ?? []));
      assert.equal(calls[0].function.name, 'bash');
      assert.match(calls[0].id, /^call_/);
      assert.equal(JSON.parse(calls.map((c) => c.function.arguments).join('')).command, DEFAULT_STANDIN_COMMAND);
      assert.ok(chunks.some((c) => c.choices[0]?.finish_reason === 'tool_calls'), 'finish_reason tool_calls');
      assert.deepEqual(chunks.at(-1).choices, []);
      assert.ok(chunks.at(-1).usage.total_tokens > 0, 'a usage chunk');

      const final = await events(await ask({ messages: afterTool, tools: [opencodeBash], stream: true }));
      const finalChunks = final.slice(0, -1).map((e) => JSON.parse(e.data));
      assert.equal(finalChunks.map((c) => c.choices[0].delta.content ?? '').join(''), 'done');
      assert.equal(finalChunks.at(-1).choices[0].finish_reason, 'stop');
    });

    test('structured output gets the smallest value its schema allows', async () => {
      const schema = { type: 'object', properties: { title: { type: 'string' }, n: { type: 'integer', minimum: 1 } }, required: ['title', 'n'] };
      const res = await (await ask({ messages: firstTurn, response_format: { type: 'json_schema', json_schema: { name: 't', schema } } })).json();
      assert.deepEqual(JSON.parse(res.choices[0].message.content), { title: 'stand-in', n: 1 });
    });

    test('GET /v1/models lists models; unknown paths are 404 in OpenAI\'s error shape', async () => {
      const models = await (await fetch(`${s.openai.baseUrl}/models`)).json();
      assert.equal(models.object, 'list');
      assert.ok(models.data.every((m: { object: string }) => m.object === 'model'), 'model objects');
      const missing = await fetch(`${s.openai.baseUrl}/embeddings`, { method: 'POST' });
      assert.equal(missing.status, 404);
      assert.equal((await missing.json()).error.code, 'unknown_url');
    });
  });

  describe('Google Gemini', () => {
    const at = (path: string) => `${s.google.url}/v1beta/models/gemini-2.5-pro:${path}`;
    const firstTurn = [{ role: 'user', parts: [{ text: 'prove it' }] }];
    const afterTool = [
      ...firstTurn,
      { role: 'model', parts: [{ functionCall: { name: 'run_shell_command', args: { command: 'x' } } }] },
      { role: 'user', parts: [{ functionResponse: { name: 'run_shell_command', response: { output: 'brokered-ok' } } }] },
    ];

    test('generateContent with run_shell_command: a functionCall with {command}; x-goog-api-key is recorded', async () => {
      const res = await post(at('generateContent'), { contents: firstTurn, tools: [geminiShell] }, { 'x-goog-api-key': 'AIza-test' });
      assert.equal(res.status, 200);
      const body = await res.json();
      const cand = body.candidates[0];
      assert.equal(cand.content.role, 'model');
      assert.equal(cand.finishReason, 'STOP');
      assert.deepEqual(cand.content.parts, [{ functionCall: { name: 'run_shell_command', args: { command: DEFAULT_STANDIN_COMMAND } } }]);
      assert.ok(body.usageMetadata.totalTokenCount > 0, 'usage counted');
      const seen = lastAt(s, '/v1beta/models/gemini-2.5-pro:generateContent');
      assert.equal(seen.provider, 'google');
      assert.equal(seen.credential, 'AIza-test');
      assert.equal(seen.credentialFrom, 'x-goog-api-key');
    });

    test('streamGenerateContent?alt=sse after a functionResponse: text chunks of "done", the last with finishReason; ?key= recorded', async () => {
      const evs = await events(await post(`${at('streamGenerateContent')}?alt=sse&key=AIza-query`, { contents: afterTool, tools: [geminiShell] }));
      const chunks = evs.map((e) => JSON.parse(e.data));
      assert.ok(chunks.length > 1, 'more than one chunk');
      assert.equal(chunks.map((c) => c.candidates[0].content.parts[0].text).join(''), 'done');
      assert.equal(chunks.at(-1).candidates[0].finishReason, 'STOP');
      assert.equal(chunks[0].candidates[0].finishReason, undefined);
      assert.ok(chunks.at(-1).usageMetadata, 'usage on the last chunk');
      const seen = lastAt(s, '/v1beta/models/gemini-2.5-pro:streamGenerateContent');
      assert.equal(seen.credential, 'AIza-query');
      assert.equal(seen.credentialFrom, 'query-key');
      assert.equal(seen.query.alt, 'sse');
    });

    test('streamGenerateContent without alt=sse: a JSON array of responses', async () => {
      const res = await post(at('streamGenerateContent'), { contents: firstTurn, tools: [geminiShell] });
      assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
      const chunks = await res.json();
      assert.ok(Array.isArray(chunks), 'a JSON array');
      assert.equal(chunks[0].candidates[0].content.parts[0].functionCall.name, 'run_shell_command');
    });

    test('JSON mode (gemini-cli\'s next-speaker check) gets the smallest value of its upper-case schema', async () => {
      const responseSchema = {
        type: 'OBJECT',
        properties: { reasoning: { type: 'STRING' }, next_speaker: { type: 'STRING', enum: ['user', 'model'] } },
        required: ['reasoning', 'next_speaker'],
      };
      const body = await (await post(at('generateContent'), { contents: afterTool, generationConfig: { responseMimeType: 'application/json', responseSchema } })).json();
      assert.deepEqual(JSON.parse(body.candidates[0].content.parts[0].text), { reasoning: 'stand-in', next_speaker: 'user' });
    });

    test('without tools: the short side text', async () => {
      const body = await (await post(at('generateContent'), { contents: firstTurn })).json();
      assert.deepEqual(body.candidates[0].content.parts, [{ text: 'ok' }]);
    });

    test('countTokens, the model list and one model; unknown paths are 404 in Google\'s error shape', async () => {
      assert.ok((await (await post(at('countTokens'), { contents: firstTurn })).json()).totalTokens > 0, 'a token count');
      const list = await (await fetch(`${s.google.url}/v1beta/models`)).json();
      assert.ok(list.models.every((m: { name: string }) => m.name.startsWith('models/')), 'model names');
      assert.equal((await (await fetch(`${s.google.url}/v1beta/models/gemini-x`)).json()).name, 'models/gemini-x');
      const missing = await post(at('embedContent'), {});
      assert.equal(missing.status, 404);
      assert.deepEqual(Object.keys((await missing.json()).error).sort(), ['code', 'message', 'status']);
    });
  });
});

describe('provider stand-ins with options', () => {
  test('keys: a wrong credential gets each provider\'s refusal, the right one the answer; unset providers accept any', async () => {
    const s = await startProviderStandins({ keys: { anthropic: 'sk-ant-right', google: 'AIza-right' } });
    try {
      const body = { model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] };
      const wrong = await post(`${s.anthropic.url}/v1/messages`, body, { 'x-api-key': 'sk-ant-wrong' });
      assert.equal(wrong.status, 401);
      assert.equal((await wrong.json()).error.type, 'authentication_error');
      assert.equal((await post(`${s.anthropic.url}/v1/messages`, body, { 'x-api-key': 'sk-ant-right' })).status, 200);
      assert.equal((await fetch(`${s.anthropic.url}/api/hello`)).status, 200, 'the connectivity probe needs no key');

      const gemini = `${s.google.url}/v1beta/models/g:generateContent`;
      assert.equal((await post(gemini, { contents: [] }, { 'x-goog-api-key': 'AIza-wrong' })).status, 400);
      assert.equal((await post(`${gemini}?key=AIza-right`, { contents: [] })).status, 200);
      assert.equal((await post(`${s.openai.baseUrl}/chat/completions`, { model: 'm', messages: [] })).status, 200);
      assert.deepEqual(
        s.seen.map((r) => [r.provider, r.status]),
        [['anthropic', 401], ['anthropic', 200], ['anthropic', 200], ['google', 400], ['google', 200], ['openai', 200]],
      );
    } finally {
      await s.close();
    }
  });

  test('command, finalText and sideText replace the defaults', async () => {
    const s = await startProviderStandins({ command: 'uname -a', finalText: 'finished', sideText: 'side' });
    try {
      const url = `${s.openai.baseUrl}/chat/completions`;
      const call = await (await post(url, { model: 'm', messages: [{ role: 'user', content: 'x' }], tools: [opencodeBash] })).json();
      assert.equal(JSON.parse(call.choices[0].message.tool_calls[0].function.arguments).command, 'uname -a');
      const messages = [{ role: 'user', content: 'x' }, { role: 'tool', tool_call_id: 'c', content: 'Linux' }];
      assert.equal((await (await post(url, { model: 'm', messages, tools: [opencodeBash] })).json()).choices[0].message.content, 'finished');
      assert.equal((await (await post(url, { model: 'm', messages })).json()).choices[0].message.content, 'side');
    } finally {
      await s.close();
    }
  });
});

describe('echo host', () => {
  test('GET / says hello with its name; /bytes streams exactly N bytes; the rest is 400 or 404', async () => {
    const host = await startEchoHost({ name: 'allowed.test' });
    try {
      assert.match(host.url, /^http:\/\/127\.0\.0\.1:\d+$/);
      assert.equal(await (await fetch(`${host.url}/`)).text(), 'hello from allowed.test');
      const n = 1_000_003;
      const res = await fetch(`${host.url}/bytes?n=${n}`);
      assert.equal(res.headers.get('content-length'), String(n));
      assert.equal((await res.arrayBuffer()).byteLength, n);
      assert.equal((await (await fetch(`${host.url}/bytes?n=0`)).arrayBuffer()).byteLength, 0);
      assert.equal((await fetch(`${host.url}/bytes?n=-1`)).status, 400);
      assert.equal((await fetch(`${host.url}/bytes?n=lots`)).status, 400);
      assert.equal((await fetch(`${host.url}/elsewhere`)).status, 404);
      assert.deepEqual(host.seen.map((r) => r.path), ['/', '/bytes', '/bytes', '/bytes', '/bytes', '/elsewhere']);
    } finally {
      await host.close();
    }
  });

  test('the default name is echo-host, and a reader that hangs up mid-download does not stall close', async () => {
    const host = await startEchoHost();
    try {
      assert.equal(await (await fetch(host.url)).text(), 'hello from echo-host');
      const ctl = new AbortController();
      const res = await fetch(`${host.url}/bytes?n=${1024 ** 3}`, { signal: ctl.signal });
      const reader = res.body!.getReader();
      await reader.read();
      ctl.abort();
    } finally {
      await host.close();
    }
  });
});
