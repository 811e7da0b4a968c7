import { randomBytes } from 'node:crypto';
import { EventStream, estimateTokens, fields, list, pieces, sendJson, type Exchange, type ProviderApi } from './http.ts';
import { scriptedTurn, type ToolOffer, type TurnScript } from './turn.ts';

const MODELS = ['gemini-2.5-pro', 'gemini-2.5-flash', 'gemini-2.5-flash-lite'];

/**
 * The Gemini API (ai.google.dev/api): generateContent, streamGenerateContent (SSE with `alt=sse`, a
 * JSON array without), countTokens and the model list, under v1beta and v1, with the scripted turn as the model.
 */
export function googleApi(script: TurnScript): ProviderApi {
  return {
    provider: 'google',
    unauthorized: ({ res }) => sendError(res, 'INVALID_ARGUMENT', 'API key not valid. Please pass a valid API key.'),
    answer(ex) {
      const { method, path } = ex.seen;
      if (method === 'GET' && /^\/v1(beta|alpha)?\/models$/.test(path)) return sendJson(ex.res, 200, { models: MODELS.map(model) });
      const call = /^\/v1(?:beta|alpha)?\/models\/([^/:]+):([A-Za-z]+)$/.exec(path);
      const named = /^\/v1(?:beta|alpha)?\/models\/([^/:]+)$/.exec(path);
      if (method === 'GET' && named) return sendJson(ex.res, 200, model(decodeURIComponent(named[1])));
      if (method === 'POST' && call) {
        const modelId = decodeURIComponent(call[1]);
        if (call[2] === 'generateContent') return generate(ex, script, modelId, 'once');
        if (call[2] === 'streamGenerateContent') return generate(ex, script, modelId, ex.seen.query.alt === 'sse' ? 'sse' : 'array');
        if (call[2] === 'countTokens') {
          const body = fields(ex.seen.body);
          return sendJson(ex.res, 200, { totalTokens: estimateTokens(body.contents ?? fields(body.generateContentRequest).contents) });
        }
      }
      sendError(ex.res, 'NOT_FOUND', `Method not found: ${method} ${path}`);
    },
  };
}

function model(modelId: string) {
  return {
    name: `models/${modelId}`,
    version: '001',
    displayName: modelId,
    description: 'Stand-in model',
    inputTokenLimit: 1_048_576,
    outputTokenLimit: 65_536,
    supportedGenerationMethods: ['generateContent', 'countTokens'],
  };
}

const CODES: Record<string, number> = { INVALID_ARGUMENT: 400, NOT_FOUND: 404 };

function sendError(res: Exchange['res'], status: string, message: string) {
  sendJson(res, CODES[status], { error: { code: CODES[status], message, status } });
}

type Part = { text: string } | { functionCall: { name: string; args: Record<string, unknown> } };

function generate(ex: Exchange, script: TurnScript, modelId: string, mode: 'once' | 'sse' | 'array') {
  const body = fields(ex.seen.body);
  if (!Array.isArray(body.contents)) return sendError(ex.res, 'INVALID_ARGUMENT', 'contents is required');
  const tools: ToolOffer[] = list(body.tools).flatMap((t) =>
    list(fields(t).functionDeclarations)
      .map(fields)
      .filter((d) => typeof d.name === 'string')
      .map((d): ToolOffer => ({ name: d.name as string, kind: 'function', schema: d.parameters ?? d.parametersJsonSchema })),
  );
  const config = fields(body.generationConfig);
  const turn = scriptedTurn(script, {
    tools,
    toolOutputSeen: body.contents.some((c) => list(fields(c).parts).some((p) => fields(p).functionResponse !== undefined)),
    jsonSchema: config.responseMimeType === 'application/json' ? (config.responseJsonSchema ?? config.responseSchema) : undefined,
  });
  const partsPerChunk: Part[][] =
    turn.kind === 'call' ? [[{ functionCall: { name: turn.tool.name, args: turn.args } }]] : mode === 'once' ? [[{ text: turn.text }]] : pieces(turn.text, 2).map((text) => [{ text }]);
  const promptTokenCount = estimateTokens(body.contents);
  const candidatesTokenCount = estimateTokens(partsPerChunk);
  const responseId = randomBytes(12).toString('base64url');
  // Every chunk is a whole GenerateContentResponse; only the last one says why it stopped and counts tokens.
  const chunks = partsPerChunk.map((parts, i) => {
    const last = i === partsPerChunk.length - 1;
    return {
      candidates: [{ content: { role: 'model', parts }, index: 0, ...(last ? { finishReason: 'STOP' } : {}) }],
      ...(last ? { usageMetadata: { promptTokenCount, candidatesTokenCount, totalTokenCount: promptTokenCount + candidatesTokenCount } } : {}),
      modelVersion: modelId,
      responseId,
    };
  });
  if (mode === 'once') return sendJson(ex.res, 200, chunks[0]);
  if (mode === 'array') return sendJson(ex.res, 200, chunks);
  const sse = new EventStream(ex.res);
  for (const chunk of chunks) sse.send(chunk);
  sse.end();
}
