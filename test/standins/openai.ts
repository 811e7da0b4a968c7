import { randomBytes } from 'node:crypto';
import { EventStream, estimateTokens, fields, list, pieces, sendJson, type Exchange, type ProviderApi } from './http.ts';
import { scriptedTurn, type ToolOffer, type TurnReply, type TurnScript } from './turn.ts';

const MODELS = ['gpt-5', 'gpt-5-codex', 'gpt-4.1', 'o4-mini'];

const id = (prefix: string) => `${prefix}_${randomBytes(12).toString('hex')}`;
const now = () => Math.floor(Date.now() / 1000);

/**
 * OpenAI's Responses API (platform.openai.com/docs/api-reference/responses) and Chat Completions
 * (…/chat), streamed and not, with the scripted turn as the model; and the model list.
 */
export function openaiApi(script: TurnScript): ProviderApi {
  return {
    provider: 'openai',
    unauthorized: ({ res }) => sendError(res, 401, 'invalid_request_error', 'invalid_api_key', 'Incorrect API key provided.'),
    answer(ex) {
      const { method, path } = ex.seen;
      if (method === 'POST' && path === '/v1/responses') return responses(ex, script);
      if (method === 'POST' && path === '/v1/chat/completions') return chatCompletions(ex, script);
      if (method === 'GET' && path === '/v1/models') return sendJson(ex.res, 200, { object: 'list', data: MODELS.map(model) });
      const one = /^\/v1\/models\/([^/]+)$/.exec(path);
      if (method === 'GET' && one) return sendJson(ex.res, 200, model(decodeURIComponent(one[1])));
      sendError(ex.res, 404, 'invalid_request_error', 'unknown_url', `Unknown request URL: ${method} ${path}.`);
    },
  };
}

function model(modelId: string) {
  return { id: modelId, object: 'model', created: 1_735_689_600, owned_by: 'openai' };
}

function sendError(res: Exchange['res'], status: number, type: string, code: string, message: string) {
  sendJson(res, status, { error: { message, type, param: null, code } });
}

// ---- Responses API ----

function responses(ex: Exchange, script: TurnScript) {
  const body = fields(ex.seen.body);
  if (typeof body.model !== 'string' || body.input === undefined) return sendError(ex.res, 400, 'invalid_request_error', 'missing_required_parameter', 'model and input are required');
  const input = typeof body.input === 'string' ? [] : list(body.input).map(fields);
  // Tools come in `tools`, and (codex) in input items that carry tools, grouped in namespaces.
  const offered = [...list(body.tools), ...input.flatMap((item) => list(item.tools))];
  const flat = (raw: unknown): Record<string, unknown>[] => {
    const t = fields(raw);
    return t.type === 'namespace' ? list(t.tools).flatMap(flat) : [t];
  };
  const tools: ToolOffer[] = offered.flatMap(flat).flatMap((t): ToolOffer[] => {
    if (t.type === 'local_shell') return [{ name: 'local_shell', kind: 'local_shell' }];
    // A freeform tool that runs JavaScript over nested tools (codex's code mode, `exec`).
    if (t.type === 'custom' && typeof t.name === 'string' && typeof t.description === 'string' && /JavaScript/.test(t.description) && /exec_command\(/.test(t.description)) {
      return [{ name: t.name, kind: 'code_mode' }];
    }
    return t.type === 'function' && typeof t.name === 'string' ? [{ name: t.name, kind: 'function', schema: t.parameters }] : [];
  });
  const format = fields(fields(body.text).format);
  const turn = scriptedTurn(script, {
    tools,
    // function_call_output, local_shell_call_output, custom_tool_call_output…
    toolOutputSeen: input.some((item) => typeof item.type === 'string' && item.type.endsWith('_call_output')),
    jsonSchema: format.type === 'json_schema' ? format.schema : undefined,
  });
  const item = outputItem(turn);
  const response = {
    id: id('resp'),
    object: 'response',
    created_at: now(),
    status: 'completed',
    error: null,
    incomplete_details: null,
    instructions: body.instructions ?? null,
    model: body.model,
    output: [item],
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: body.previous_response_id ?? null,
    tool_choice: body.tool_choice ?? 'auto',
    tools: body.tools ?? [],
    text: body.text ?? { format: { type: 'text' } },
    metadata: {},
    usage: usage(estimateTokens(body.input), estimateTokens(item)),
  };
  if (body.stream !== true) return sendJson(ex.res, 200, response);

  // The event sequence of platform.openai.com/docs/api-reference/responses-streaming.
  const sse = new EventStream(ex.res);
  let sequence = 0;
  const emit = (data: { type: string } & Record<string, unknown>) => sse.send({ ...data, sequence_number: sequence++ }, data.type);
  const pending = { ...response, status: 'in_progress', output: [], usage: null };
  emit({ type: 'response.created', response: pending });
  emit({ type: 'response.in_progress', response: pending });
  const output_index = 0;
  if (item.type === 'message') {
    const item_id = item.id;
    const text = item.content[0].text;
    emit({ type: 'response.output_item.added', output_index, item: { ...item, status: 'in_progress', content: [] } });
    const part = { type: 'output_text', text: '', annotations: [] };
    emit({ type: 'response.content_part.added', item_id, output_index, content_index: 0, part });
    for (const delta of pieces(text)) emit({ type: 'response.output_text.delta', item_id, output_index, content_index: 0, delta, logprobs: [] });
    emit({ type: 'response.output_text.done', item_id, output_index, content_index: 0, text, logprobs: [] });
    emit({ type: 'response.content_part.done', item_id, output_index, content_index: 0, part: { ...part, text } });
  } else if (item.type === 'custom_tool_call') {
    emit({ type: 'response.output_item.added', output_index, item: { ...item, status: 'in_progress', input: '' } });
    for (const delta of pieces(item.input)) emit({ type: 'response.custom_tool_call_input.delta', item_id: item.id, output_index, delta });
    emit({ type: 'response.custom_tool_call_input.done', item_id: item.id, output_index, input: item.input });
  } else if (item.type === 'function_call') {
    emit({ type: 'response.output_item.added', output_index, item: { ...item, status: 'in_progress', arguments: '' } });
    for (const delta of pieces(item.arguments)) emit({ type: 'response.function_call_arguments.delta', item_id: item.id, output_index, delta });
    emit({ type: 'response.function_call_arguments.done', item_id: item.id, output_index, name: item.name, arguments: item.arguments });
  } else {
    emit({ type: 'response.output_item.added', output_index, item: { ...item, status: 'in_progress' } });
  }
  emit({ type: 'response.output_item.done', output_index, item });
  emit({ type: 'response.completed', response });
  sse.end();
}

function outputItem(turn: TurnReply) {
  if (turn.kind === 'text') {
    return {
      type: 'message' as const,
      id: id('msg'),
      status: 'completed',
      role: 'assistant',
      content: [{ type: 'output_text', text: turn.text, annotations: [] }],
    };
  }
  if (turn.tool.kind === 'code_mode') {
    // The model's program for code mode: run the command with the nested shell tool, return its output.
    const input = `const r = await tools.exec_command({ cmd: ${JSON.stringify(turn.command)} });\ntext(typeof r === 'string' ? r : r.output);\n`;
    return { type: 'custom_tool_call' as const, id: id('ctc'), call_id: id('call'), name: turn.tool.name, input, status: 'completed' };
  }
  if (turn.tool.kind === 'local_shell') {
    return {
      type: 'local_shell_call' as const,
      id: id('lsh'),
      call_id: id('call'),
      status: 'completed',
      action: { type: 'exec', command: ['bash', '-lc', turn.command], timeout_ms: null, working_directory: null, env: {}, user: null },
    };
  }
  return { type: 'function_call' as const, id: id('fc'), call_id: id('call'), name: turn.tool.name, arguments: JSON.stringify(turn.args), status: 'completed' };
}

function usage(input: number, output: number) {
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: input + output,
  };
}

// ---- Chat Completions ----

function chatCompletions(ex: Exchange, script: TurnScript) {
  const body = fields(ex.seen.body);
  if (typeof body.model !== 'string' || !Array.isArray(body.messages)) {
    return sendError(ex.res, 400, 'invalid_request_error', 'missing_required_parameter', 'model and messages are required');
  }
  const tools: ToolOffer[] = list(body.tools).flatMap((raw): ToolOffer[] => {
    const fn = fields(fields(raw).function);
    return typeof fn.name === 'string' ? [{ name: fn.name, kind: 'function', schema: fn.parameters }] : [];
  });
  const format = fields(body.response_format);
  const turn = scriptedTurn(script, {
    tools,
    toolOutputSeen: body.messages.some((m) => fields(m).role === 'tool' || fields(m).role === 'function'),
    jsonSchema: format.type === 'json_schema' ? fields(format.json_schema).schema : undefined,
  });
  const completionId = `chatcmpl-${randomBytes(12).toString('hex')}`;
  const created = now();
  const toolCall = turn.kind === 'call' ? { id: id('call'), type: 'function', function: { name: turn.tool.name, arguments: JSON.stringify(turn.args) } } : undefined;
  const text = turn.kind === 'text' ? turn.text : null;
  const finish_reason = toolCall ? 'tool_calls' : 'stop';
  const prompt_tokens = estimateTokens(body.messages);
  const completion_tokens = estimateTokens(toolCall ?? text);
  const counts = { prompt_tokens, completion_tokens, total_tokens: prompt_tokens + completion_tokens };
  if (body.stream !== true) {
    return sendJson(ex.res, 200, {
      id: completionId,
      object: 'chat.completion',
      created,
      model: body.model,
      choices: [{ index: 0, message: { role: 'assistant', content: text, refusal: null, ...(toolCall ? { tool_calls: [toolCall] } : {}) }, logprobs: null, finish_reason }],
      usage: counts,
    });
  }

  const sse = new EventStream(ex.res);
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
    sse.send({ id: completionId, object: 'chat.completion.chunk', created, model: body.model, system_fingerprint: null, choices, ...extra });
  const delta = (d: Record<string, unknown>, finish: string | null = null) => chunk([{ index: 0, delta: d, logprobs: null, finish_reason: finish }]);
  delta({ role: 'assistant', content: toolCall ? null : '' });
  if (toolCall) {
    delta({ tool_calls: [{ index: 0, id: toolCall.id, type: 'function', function: { name: toolCall.function.name, arguments: '' } }] });
    for (const args of pieces(toolCall.function.arguments)) delta({ tool_calls: [{ index: 0, function: { arguments: args } }] });
  } else {
    for (const content of pieces(text ?? '')) delta({ content });
  }
  delta({}, finish_reason);
  if (fields(body.stream_options).include_usage === true) chunk([], { usage: counts });
  sse.send('[DONE]');
  sse.end();
}
