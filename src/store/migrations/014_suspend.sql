-- Suspend with memory (decisions section 12): a VM can be suspended (its memory saved on its host) or
-- on its way there, and a customer can want it so.
ALTER TABLE vms DROP CONSTRAINT IF EXISTS vms_status_check;
ALTER TABLE vms ADD CONSTRAINT vms_status_check CHECK (status IN ('provisioning', 'running', 'stopping', 'stopped', 'starting',
  'restarting', 'reprovisioning', 'failed', 'suspending', 'suspended', 'deleted'));
ALTER TABLE vms DROP CONSTRAINT IF EXISTS vms_desired_state_check;
ALTER TABLE vms ADD CONSTRAINT vms_desired_state_check CHECK (desired_state IN ('running', 'stopped', 'suspended', 'deleted'));
