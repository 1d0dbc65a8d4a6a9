-- 0013: per-node files a control-plane step publishes (an autoinstall ISO
-- holding a single-use join token), served by the node's site agent at an
-- unguessable URL until they expire; and where each site's agent serves
-- them (its boot listener, said at each start), so a step can name the URL
-- the machine's BMC fetches.

CREATE TABLE artifacts (
    id         text        PRIMARY KEY,  -- 32 random bytes, base32: the URL's secret part
    tenant_id  text        NOT NULL,
    site_id    text        NOT NULL,
    node_id    text        NOT NULL,
    name       text        NOT NULL,
    sha256     text        NOT NULL,
    bytes      bytea       NOT NULL
        CONSTRAINT artifacts_bytes_bounded CHECK (octet_length(bytes) <= 67108864),
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT artifacts_site_fk FOREIGN KEY (tenant_id, site_id) REFERENCES sites (tenant_id, id)
);

CREATE INDEX artifacts_node_idx ON artifacts (tenant_id, node_id);
CREATE INDEX artifacts_expires_idx ON artifacts (expires_at);

ALTER TABLE sites ADD COLUMN artifacts_url text NOT NULL DEFAULT '';
