-- 0002: machines and what is sent to them. metal_nodes holds each machine's
-- state (moved only by compare-and-set), commands the log of every command
-- sent to a site or a ramdisk, join_tokens and certificates the admission of
-- agents, secrets the BMC credentials (encrypted), settings the keys the
-- control plane processes share.

CREATE TABLE settings (
    name       text        PRIMARY KEY,
    value      bytea       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE secrets (
    id         text        PRIMARY KEY,
    tenant_id  text        NOT NULL CONSTRAINT secrets_tenant_fk REFERENCES tenants (id),
    sealed     bytea       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE metal_nodes (
    id                  text        PRIMARY KEY,
    tenant_id           text        NOT NULL,
    site_id             text        NOT NULL,
    pool_id             text        NOT NULL,
    state               text        NOT NULL,
    failed_from         text,
    maintenance         boolean     NOT NULL DEFAULT false,
    maintenance_reason  text        NOT NULL DEFAULT '',
    role                text        NOT NULL DEFAULT '',
    bmc_address         text        NOT NULL,
    bmc_driver          text        NOT NULL,
    bmc_credentials_ref text        NOT NULL,
    macs                text[]      NOT NULL DEFAULT '{}',
    product_uuid        text        NOT NULL DEFAULT '',
    addresses           text[]      NOT NULL DEFAULT '{}',
    inventory           jsonb,
    disks               text[]      NOT NULL DEFAULT '{}',
    profile_id          text        NOT NULL DEFAULT '',
    profile_version     integer     NOT NULL DEFAULT 0,
    last_error          text        NOT NULL DEFAULT '',
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT metal_nodes_tenant_id_key UNIQUE (tenant_id, id),
    CONSTRAINT metal_nodes_site_fk FOREIGN KEY (tenant_id, site_id) REFERENCES sites (tenant_id, id),
    CONSTRAINT metal_nodes_pool_fk FOREIGN KEY (tenant_id, pool_id) REFERENCES pools (tenant_id, id)
);

-- One live record per BMC: enrolling the same BMC twice is ALREADY_EXISTS.
CREATE UNIQUE INDEX metal_nodes_bmc_key ON metal_nodes (site_id, bmc_address) WHERE state <> 'retired';

CREATE TABLE commands (
    id          text        PRIMARY KEY,
    tenant_id   text        NOT NULL,
    node_id     text        NOT NULL,
    site_id     text        NOT NULL,
    kind        text        NOT NULL,
    runs_on     text        NOT NULL,
    workflow_id text        NOT NULL,
    run_id      text        NOT NULL,
    step        text        NOT NULL,
    attempt     integer     NOT NULL DEFAULT 1,
    status      text        NOT NULL,
    error_kind  text        NOT NULL DEFAULT '',
    error       text        NOT NULL DEFAULT '',
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    CONSTRAINT commands_step_key UNIQUE (workflow_id, run_id, step)
);

CREATE INDEX commands_node_idx ON commands (tenant_id, node_id, id);

CREATE TABLE join_tokens (
    id          text        PRIMARY KEY,
    tenant_id   text        NOT NULL,
    site_id     text        NOT NULL,
    node_id     text        NOT NULL,
    kind        text        NOT NULL,
    hash        bytea       NOT NULL CONSTRAINT join_tokens_hash_key UNIQUE,
    workflow_id text        NOT NULL DEFAULT '',
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE certificates (
    serial     text        PRIMARY KEY,
    tenant_id  text        NOT NULL,
    role       text        NOT NULL,
    identity   text        NOT NULL,
    site_id    text        NOT NULL,
    token_id   text        NOT NULL,
    public_key bytea       NOT NULL,
    cert_pem   bytea       NOT NULL,
    issued_at  timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz
);

CREATE INDEX certificates_identity_idx ON certificates (identity, issued_at);
