-- When a host's cached build step was last made or taken by a build: cached layers no image or VM
-- holds are removed once unused for a while (host/layerGc.ts).
ALTER TABLE image_layers ADD COLUMN used_at timestamptz;
UPDATE image_layers SET used_at = created_at;
ALTER TABLE image_layers ALTER COLUMN used_at SET NOT NULL;

-- The VMs made of an image: what the gallery's "most used" and "trending" sorts of images count.
CREATE INDEX vms_root_image ON vms (root_image_id) WHERE root_image_id IS NOT NULL;
