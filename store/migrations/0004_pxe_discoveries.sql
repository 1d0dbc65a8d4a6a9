-- 0004: PXE discovery. pxe_discoveries holds, per site, the MACs its agents
-- saw PXE-booting without a boot entry, as the agents report them (each
-- report carries a MAC's whole record, so it can be sent again).
-- node_mac_waits holds the nodes enrolled by product UUID only whose
-- workflow waits for their MAC in metal.ensureRamdisk, and the candidate it
-- found; metal.confirmMac ends the wait by binding a MAC to the node.

CREATE TABLE pxe_discoveries (
    tenant_id   text        NOT NULL,
    site_id     text        NOT NULL,
    mac         text        NOT NULL,
    client_uuid text        NOT NULL DEFAULT '',  -- DHCP option 97 as sent
    arch        text        NOT NULL DEFAULT '',  -- DHCP option 93, by its IANA name
    first_seen  timestamptz NOT NULL,             -- the site agent's clock
    last_seen   timestamptz NOT NULL,
    count       bigint      NOT NULL,
    -- The control plane's clock when a report last brought a new sighting
    -- (a later last_seen or a higher count): what "seen since the power
    -- cycle" is measured by, whatever the site agent's clock says.
    heard_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT pxe_discoveries_pkey PRIMARY KEY (tenant_id, site_id, mac),
    CONSTRAINT pxe_discoveries_site_fk FOREIGN KEY (tenant_id, site_id) REFERENCES sites (tenant_id, id)
);

CREATE INDEX pxe_discoveries_uuid_idx ON pxe_discoveries (tenant_id, site_id, client_uuid, heard_at);

CREATE TABLE node_mac_waits (
    tenant_id   text        NOT NULL,
    node_id     text        NOT NULL,
    waiting_for text        NOT NULL CONSTRAINT node_mac_waits_waiting_for_check
                            CHECK (waiting_for IN ('pxeDiscovery', 'macConfirmation')),
    candidate   text        NOT NULL DEFAULT '',
    since       timestamptz NOT NULL DEFAULT now(),  -- when the workflow began looking
    CONSTRAINT node_mac_waits_pkey PRIMARY KEY (tenant_id, node_id),
    CONSTRAINT node_mac_waits_node_fk FOREIGN KEY (tenant_id, node_id) REFERENCES metal_nodes (tenant_id, id),
    CONSTRAINT node_mac_waits_candidate_check CHECK ((waiting_for = 'macConfirmation') = (candidate <> ''))
);
