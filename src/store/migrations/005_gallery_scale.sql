-- The gallery at 100,000 templates: trending becomes a stored score whose order does not change as
-- time passes (popularity on a log scale plus creation time: 10x the forks and stars = 12.5 hours
-- newer), so the first page is an index scan, not a score computed and sorted for every row.
CREATE FUNCTION template_hot(forks integer, stars integer, created_at timestamptz) RETURNS double precision
  LANGUAGE sql IMMUTABLE AS $$
  -- The epoch of a timestamptz does not depend on the time zone: immutable in fact.
  SELECT log(greatest(forks * 2 + stars, 1)::double precision) + date_part('epoch', created_at AT TIME ZONE 'UTC') / 45000
$$;
ALTER TABLE templates ADD COLUMN hot double precision GENERATED ALWAYS AS (template_hot(forks, stars, created_at)) STORED;

-- Each sort's first page of the public gallery; a tenant's own templates are few and sorted as read.
DROP INDEX templates_public_new;
CREATE INDEX templates_public_hot ON templates (hot DESC, template_id) WHERE visibility = 'public' AND status = 'ready';
CREATE INDEX templates_public_new ON templates (created_at DESC, template_id) WHERE visibility = 'public' AND status = 'ready';
CREATE INDEX templates_public_forks ON templates (forks DESC, created_at DESC, template_id) WHERE visibility = 'public' AND status = 'ready';
CREATE INDEX templates_public_stars ON templates (stars DESC, created_at DESC, template_id) WHERE visibility = 'public' AND status = 'ready';
CREATE INDEX templates_owner ON templates (tenant_id);
