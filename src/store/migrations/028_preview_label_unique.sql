-- A VM's preview label (its id lowercased, `_` as `-`) names it in preview hosts: one live VM per label
-- (decisions section 16; an id whose label is taken is drawn again at creation).
DROP INDEX vms_preview_label;
CREATE UNIQUE INDEX vms_preview_label ON vms (lower(replace(vm_id, '_', '-'))) WHERE deleted_at IS NULL;
