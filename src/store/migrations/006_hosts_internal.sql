-- Scale-out: where a VM host serves its internal endpoint (runs, secrets and captures of its VMs,
-- called by the API replicas).
ALTER TABLE hosts ADD COLUMN internal_url text;
