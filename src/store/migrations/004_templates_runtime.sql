-- Captures and forks: where a template's disk image is, and the platform's starter templates.
ALTER TABLE templates ADD COLUMN updated_at timestamptz;

-- A fresh install's gallery: an empty workspace per harness, public, owned by the platform.
-- Forking one gives a VM with an empty persist disk and that harness.
INSERT INTO templates (template_id, tenant_id, slug, name, description, harness, plan, visibility, tags, status, created_at)
VALUES
  ('tpl_starterclaudecode00000', NULL, 'claude-code-workspace', 'Claude Code workspace', 'An empty workspace with Claude Code ready; set ANTHROPIC_API_KEY as a VM secret.', 'claude-code', 'starter', 'public', '{starter,claude-code}', 'ready', '2026-11-01T00:00:00Z'),
  ('tpl_startercodex0000000000', NULL, 'codex-workspace', 'Codex workspace', 'An empty workspace with the OpenAI Codex CLI; set OPENAI_API_KEY as a VM secret.', 'codex', 'starter', 'public', '{starter,codex}', 'ready', '2026-11-01T00:00:00Z'),
  ('tpl_starteropencode0000000', NULL, 'opencode-workspace', 'opencode workspace', 'An empty workspace with opencode; log in once inside the VM.', 'opencode', 'starter', 'public', '{starter,opencode}', 'ready', '2026-11-01T00:00:00Z'),
  ('tpl_starterecho00000000000', NULL, 'echo-workspace', 'Echo workspace', 'The diagnostic echo harness: proves a VM, its restart and its fork without an LLM account.', 'echo', 'starter', 'public', '{starter,echo,diagnostic}', 'ready', '2026-11-01T00:00:00Z');
