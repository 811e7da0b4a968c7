-- Which API replica is taking a snapshot while it is `creating` (null: the host that holds it, whose
-- start fails what it left). A replica that starts again fails the snapshots it left being made.
ALTER TABLE snapshots ADD COLUMN taken_by text;
