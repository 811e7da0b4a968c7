import { randomBytes } from 'node:crypto';
import { EventStream, estimateTokens, fields, list, pieces, sendJson, type Exchange, type ProviderApi } from './http.ts';
import { scriptedTurn, type ToolOffer, type TurnScript } from './turn.ts';

const MODELS = ['claude-sonnet-4-5', 'claude-opus-4-1', 'claude-haiku-4-5'];

type Block = { type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> };

/**
 * Anthropic's Messages API (docs.anthropic.com/en/api/messages), with the scripted turn as the model,
 * and the few other calls claude-code makes to its base URL at start.
 */
export function anthropicApi(script: TurnScript): ProviderApi {
  return {
    provider: 'anthropic',
    open: (path) => path === '/api/hello',
    unauthorized: ({ res }) => sendError(res, 401, 'authentication_error', 'invalid x-api-key'),
    answer(ex) {
      const { method, path } = ex.seen;
      if (method === 'POST' && path === '/v1/messages') return messages(ex, script);
      if (method === 'POST' && path === '/v1/messages/count_tokens') {
        return sendJson(ex.res, 200, { input_tokens: estimateTokens(fields(ex.seen.body).messages) });
      }
      if (method === 'GET' && path === '/v1/models') {
        return sendJson(ex.res, 200, { data: MODELS.map(model), has_more: false, first_id: MODELS[0], last_id: MODELS.at(-1) });
      }
      const one = /^\/v1\/models\/([^/]+)$/.exec(path);
      if (method === 'GET' && one) return sendJson(ex.res, 200, model(decodeURIComponent(one[1])));
      // claude-code's connectivity probe, telemetry and metrics opt-out check.
      if ((method === 'GET' || method === 'HEAD') && path === '/api/hello') return sendJson(ex.res, 200, { message: 'hello' });
      if (method === 'POST' && /^\/api\/event_logging(\/v2)?\/batch$/.test(path)) return sendJson(ex.res, 200, {});
      if (method === 'GET' && path === '/api/claude_code/organizations/metrics_enabled') {
        return sendJson(ex.res, 200, { metrics_logging_enabled: false });
      }
      sendError(ex.res, 404, 'not_found_error', `Not found: ${method} ${path}`);
    },
  };
}

function model(id: string) {
  return { type: 'model', id, display_name: id, created_at: '2025-01-01T00:00:00Z' };
}

function sendError(res: Exchange['res'], status: number, type: string, message: string) {
  sendJson(res, status, { type: 'error', error: { type, message } });
}

function messages(ex: Exchange, script: TurnScript) {
  const body = fields(ex.seen.body);
  if (typeof body.model !== 'string' || !Array.isArray(body.messages)) {
    return sendError(ex.res, 400, 'invalid_request_error', 'model and messages are required');
  }
  const tools: ToolOffer[] = list(body.tools)
    .map(fields)
    .filter((t) => typeof t.name === 'string')
    .map((t) => ({ name: t.name as string, kind: 'function', schema: t.input_schema }));
  const toolOutputs = body.messages.reduce((n: number, m) => n + list(fields(m).content).filter((b) => fields(b).type === 'tool_result').length, 0);
  const turn = scriptedTurn(script, { tools, toolOutputSeen: toolOutputs > 0, toolOutputs });
  const content: Block[] =
    turn.kind === 'call'
      ? [
          { type: 'text', text: 'Running the command.' },
          { type: 'tool_use', id: `toolu_${randomBytes(12).toString('hex')}`, name: turn.tool.name, input: turn.args },
        ]
      : [{ type: 'text', text: turn.text }];
  const message = {
    id: `msg_${randomBytes(12).toString('hex')}`,
    type: 'message',
    role: 'assistant',
    model: body.model,
    content,
    stop_reason: turn.kind === 'call' ? 'tool_use' : 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: estimateTokens(body.messages), output_tokens: estimateTokens(content), cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
  };
  if (body.stream !== true) return sendJson(ex.res, 200, message);

  // The event sequence of docs.anthropic.com/en/docs/build-with-claude/streaming.
  const sse = new EventStream(ex.res);
  const emit = (data: { type: string } & Record<string, unknown>) => sse.send(data, data.type);
  emit({ type: 'message_start', message: { ...message, content: [], stop_reason: null, usage: { ...message.usage, output_tokens: 1 } } });
  emit({ type: 'ping' });
  const stall = script.stallNextCall;
  if (turn.kind === 'call' && stall && (!stall.userAgent || stall.userAgent.test(String(ex.seen.headers['user-agent'] ?? '')))) {
    script.stallNextCall = undefined;
    stall.stalled();
    return; // the stream stays open with nothing more to say, until its client goes
  }
  content.forEach((block, index) => {
    if (block.type === 'text') {
      emit({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } });
      for (const text of pieces(block.text)) emit({ type: 'content_block_delta', index, delta: { type: 'text_delta', text } });
    } else {
      emit({ type: 'content_block_start', index, content_block: { ...block, input: {} } });
      for (const partial_json of pieces(JSON.stringify(block.input))) {
        emit({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json } });
      }
    }
    emit({ type: 'content_block_stop', index });
  });
  emit({ type: 'message_delta', delta: { stop_reason: message.stop_reason, stop_sequence: null }, usage: { output_tokens: message.usage.output_tokens } });
  emit({ type: 'message_stop' });
  sse.end();
}
