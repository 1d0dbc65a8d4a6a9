-- 0008: one node per machine. A machine enrolled under two spellings of its
-- BMC address, or found by inspection to be a machine already enrolled, is
-- refused by its product UUID (SMBIOS system UUID), the one identity its
-- BMC, its firmware and its ramdisk all report.

CREATE UNIQUE INDEX metal_nodes_product_uuid_key ON metal_nodes (site_id, product_uuid)
    WHERE product_uuid <> '' AND state <> 'retired';
