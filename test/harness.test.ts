import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { BROKERED_PLACEHOLDER, PROXY_ENV, buildInvocation } from '../src/harness/invoke.ts';
import { listHarnesses } from '../src/harness/catalogue.ts';
import { HARNESS_PROGRAMS } from '../src/wire/protocol.ts';
import { DomainError } from '../src/domain/errors.ts';

describe('harness invocations', () => {
  test('every harness in the catalogue has its program and an invocation', () => {
    for (const h of listHarnesses()) {
      const inv = buildInvocation(h.id, { task: 'hello' });
      assert.equal(inv.argv[0], HARNESS_PROGRAMS[h.id], h.id);
    }
  });

  test('any task is one argument, literally, after the options: never split, never a flag', () => {
    fc.assert(
      fc.property(fc.constantFrom(...listHarnesses().map((h) => h.id)), fc.string({ minLength: 1, maxLength: 300, unit: 'binary' }), (id, task) => {
        const { argv } = buildInvocation(id, { task });
        const holders = argv.filter((a) => a === task || a.endsWith(`=${task}`));
        assert.ok(holders.length >= 1, `${id}: ${JSON.stringify(argv)}`);
        const last = argv[argv.length - 1];
        // The task is the last argument: after `--`, or glued to its option with `=`, or alone (echo, ticker).
        assert.ok(last === task || last.endsWith(`=${task}`));
        if (last === task && id !== 'echo' && id !== 'ticker') assert.equal(argv[argv.length - 2], '--', id);
      }),
      { numRuns: 300 },
    );
  });

  test('model and provider: passed as options; a provider the harness does not support is 400 naming it', () => {
    assert.deepEqual(buildInvocation('claude-code', { task: 't', model: 'claude-sonnet-4', provider: 'bedrock' }), {
      argv: ['claude', '-p', '--output-format', 'text', '--dangerously-skip-permissions', '--model', 'claude-sonnet-4', '--', 't'],
      env: { ...PROXY_ENV, CLAUDE_CODE_USE_BEDROCK: '1' },
    });
    assert.deepEqual(buildInvocation('opencode', { task: 't', model: 'gpt-5', provider: 'openai' }).argv, ['opencode', 'run', '--model', 'openai/gpt-5', '--', 't']);
    assert.deepEqual(buildInvocation('gemini-cli', { task: '-rf', provider: 'vertex' }), {
      argv: ['gemini', '--yolo', '--prompt=-rf'],
      env: { ...PROXY_ENV, GOOGLE_GENAI_USE_VERTEXAI: 'true', GEMINI_CLI_SYSTEM_SETTINGS_PATH: '/etc/gemini-cli/vertex-ai.json' },
    });
    assert.equal(buildInvocation('echo', { task: 't' }).env.HTTPS_PROXY, 'http://gateway.agentvm.internal:3128', 'every run goes through the gateway');
    for (const [id, provider] of [['codex', 'anthropic'], ['echo', 'openai'], ['claude-code', 'openai']] as const) {
      assert.throws(
        () => buildInvocation(id, { task: 't', provider }),
        (err: unknown) => err instanceof DomainError && err.code === 'invalid_request' && err.message.startsWith('provider: '),
      );
    }
  });

  test('a brokered key reaches the harness as a placeholder with its provider on the gateway; without one, nothing is rerouted', () => {
    const gw = 'http://gateway.agentvm.internal:3128/providers';
    const claude = buildInvocation('claude-code', { task: 't' }, ['ANTHROPIC_API_KEY']).env;
    assert.equal(claude.ANTHROPIC_API_KEY, BROKERED_PLACEHOLDER);
    assert.equal(claude.ANTHROPIC_BASE_URL, `${gw}/anthropic`);
    assert.equal(buildInvocation('claude-code', { task: 't' }).env.ANTHROPIC_BASE_URL, undefined, 'a login-based claude goes to its provider directly');
    const codex = buildInvocation('codex', { task: 't' }, ['OPENAI_API_KEY']);
    const settings = codex.argv.flatMap((a, i) => (codex.argv[i - 1] === '-c' ? [a] : []));
    assert.ok(settings.includes(`model_providers.agentvm.base_url="${gw}/openai/v1"`), settings.join(' '));
    assert.ok(settings.includes('model_provider="agentvm"'), settings.join(' '));
    assert.ok(settings.includes('model_providers.agentvm.supports_websockets=false'), settings.join(' '));
    assert.equal(codex.env.OPENAI_API_KEY, BROKERED_PLACEHOLDER);
    assert.equal(buildInvocation('codex', { task: 't' }).argv.includes('-c'), false);
    const gemini = buildInvocation('gemini-cli', { task: 't' }, ['GEMINI_API_KEY']).env;
    assert.equal(gemini.GOOGLE_GEMINI_BASE_URL, `${gw}/google`);
    assert.equal(gemini.GEMINI_API_KEY, BROKERED_PLACEHOLDER);
    const opencode = buildInvocation('opencode', { task: 't' }, ['ANTHROPIC_API_KEY', 'GEMINI_API_KEY']).env;
    assert.deepEqual(JSON.parse(opencode.OPENCODE_CONFIG_CONTENT), {
      provider: {
        anthropic: { options: { baseURL: `${gw}/anthropic/v1`, apiKey: BROKERED_PLACEHOLDER } },
        google: { options: { baseURL: `${gw}/google/v1beta`, apiKey: BROKERED_PLACEHOLDER } },
      },
    });
    assert.equal(opencode.OPENAI_API_KEY, undefined);
  });
});
