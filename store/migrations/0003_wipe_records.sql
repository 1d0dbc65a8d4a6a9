-- 0003: the wipe invariant, enforced by the database. A node moves into
-- ready only by consuming, in the same statement, a wipe record of its own
-- that no earlier move consumed: a machine-signed wipe that wipe.verify
-- proved in that workflow run, or an exception its pool's policy allows
-- (allowUnverifiedRelease for a release; agent: none for out-of-band
-- commissioning, where no ramdisk runs). The trigger refuses any other move
-- into ready, whoever writes it.

CREATE TABLE wipe_records (
    id          text        PRIMARY KEY,
    tenant_id   text        NOT NULL,
    node_id     text        NOT NULL,
    workflow_id text        NOT NULL,
    run_id      text        NOT NULL,
    kind        text        NOT NULL CONSTRAINT wipe_records_kind_check
                            CHECK (kind IN ('attested', 'allowUnverifiedRelease', 'agentNone')),
    mode        text        NOT NULL DEFAULT '',
    disks       text[]      NOT NULL DEFAULT '{}',
    signer      text        NOT NULL DEFAULT '',
    event       text        NOT NULL DEFAULT '',  -- the event an exception published
    recorded_at timestamptz NOT NULL DEFAULT now(),
    used_at     timestamptz,                      -- when a move into ready consumed it
    -- At most one wipe record per workflow run: a second is an error, not a
    -- second proof.
    CONSTRAINT wipe_records_run_key UNIQUE (node_id, workflow_id, run_id),
    CONSTRAINT wipe_records_node_fk FOREIGN KEY (tenant_id, node_id) REFERENCES metal_nodes (tenant_id, id)
);

ALTER TABLE metal_nodes ADD COLUMN ready_by text CONSTRAINT metal_nodes_ready_by_fk REFERENCES wipe_records (id);

CREATE FUNCTION metal_nodes_ready_needs_wipe() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = 'ready' AND (TG_OP = 'INSERT' OR OLD.state <> 'ready') THEN
        -- Consume the record: it must be this node's and never consumed.
        UPDATE wipe_records SET used_at = now()
         WHERE id = NEW.ready_by AND node_id = NEW.id AND tenant_id = NEW.tenant_id AND used_at IS NULL;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'node % cannot become ready without an unused wipe record of its own', NEW.id
                USING ERRCODE = 'check_violation', CONSTRAINT = 'metal_nodes_ready_needs_wipe';
        END IF;
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER metal_nodes_ready_needs_wipe BEFORE INSERT OR UPDATE OF state ON metal_nodes
    FOR EACH ROW EXECUTE FUNCTION metal_nodes_ready_needs_wipe();
