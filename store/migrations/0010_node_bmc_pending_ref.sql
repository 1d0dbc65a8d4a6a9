-- 0010: the credentials reference metal.update is checking against a node's
-- BMC before it saves it. The node's site may resolve it meanwhile, as it
-- resolves the node's own; saving the settings or refusing them clears it.

ALTER TABLE metal_nodes ADD COLUMN bmc_pending_ref text NOT NULL DEFAULT '';
