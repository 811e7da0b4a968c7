-- E2B compatibility (decisions section 17): what an E2B create asked for beyond an agentvm VM. The
-- sandbox id is the VM's preview label; the envd access token is kept as it was issued (every get and
-- connect answers it again, as E2B's do).
CREATE TABLE e2b_sandboxes (
  vm_id text PRIMARY KEY,
  tenant_id text NOT NULL REFERENCES tenants(tenant_id),
  template_id text NOT NULL,
  access_token text NOT NULL,
  metadata jsonb NOT NULL DEFAULT '{}',
  env_vars jsonb NOT NULL DEFAULT '{}',
  auto_pause boolean NOT NULL DEFAULT false,
  end_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL
);
CREATE INDEX e2b_sandboxes_tenant ON e2b_sandboxes (tenant_id, created_at);
