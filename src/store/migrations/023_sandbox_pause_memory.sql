-- What an E2B sandbox's timeout pause keeps (decisions section 17): its memory (a suspend, the
-- default), or its filesystem only (E2B's autoPauseMemory: false; a stop, and its resume boots).
ALTER TABLE e2b_sandboxes ADD COLUMN auto_pause_memory boolean NOT NULL DEFAULT true;
