-- When a VM last became running (a boot, a resume, a standby taken): an E2B sandbox woken by a request
-- after its timeout is told from one still running past it (decisions section 17).
ALTER TABLE vms ADD COLUMN running_since timestamptz;
