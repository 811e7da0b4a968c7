-- Images of a tenant's own, built from a Dockerfile in a builder VM: the build's request, its log and
-- its outcome; the step cache of each host; and the image a VM's root starts from.
CREATE TABLE images (
  image_id text PRIMARY KEY,
  tenant_id text NOT NULL REFERENCES tenants(tenant_id),
  name text NOT NULL,
  slug text NOT NULL,
  visibility text NOT NULL,
  status text NOT NULL,
  status_reason text,
  parent text NOT NULL,
  dockerfile text NOT NULL,
  -- The build's files (path -> base64) until the build ends.
  context jsonb,
  egress jsonb NOT NULL,
  config jsonb NOT NULL DEFAULT '{}',
  packages jsonb NOT NULL DEFAULT '[]',
  size_bytes bigint NOT NULL DEFAULT 0,
  host_id text,
  layer_path text,
  last_seq integer NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL,
  ready_at timestamptz,
  deleted_at timestamptz
);
CREATE INDEX images_tenant ON images (tenant_id, created_at DESC);
CREATE INDEX images_slug ON images (slug, ready_at DESC);
CREATE INDEX images_queued ON images (created_at) WHERE status = 'queued';

CREATE TABLE image_build_log (
  image_id text NOT NULL REFERENCES images(image_id),
  seq integer NOT NULL,
  at timestamptz NOT NULL,
  text text NOT NULL,
  PRIMARY KEY (image_id, seq)
);

-- A built step's root layer on a host: the key is a hash of its parent's key, its text and its inputs.
CREATE TABLE image_layers (
  host_id text NOT NULL,
  cache_key text NOT NULL,
  path text NOT NULL,
  size_bytes bigint NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (host_id, cache_key)
);

ALTER TABLE vms ADD COLUMN root_image_id text;
