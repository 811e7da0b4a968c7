-- E2B's trafficAccessToken (decisions section 17): a sandbox made with allowPublicTraffic false keeps
-- its ports private, reached with the VM's preview token (section 16), which its create and connect
-- answers carry again. Null for a public sandbox.
ALTER TABLE e2b_sandboxes ADD COLUMN traffic_token text;
