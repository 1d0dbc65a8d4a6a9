-- 0007: data keys apart from the data they protect. The keys that seal
-- secrets and encrypt Temporal payloads are stored here only wrapped
-- (AES-256-GCM) by a key-encryption key the database never holds (the key
-- file of `serve`), so database access alone opens nothing. A key has a
-- purpose; a codec key belongs to a tenant (NULL: the control plane's own,
-- and the one key every site had before); the newest version of a purpose
-- and tenant is the one that encrypts, every other one still decrypts.
-- kek_id names the key-encryption key that wrapped it, so a wrong key file
-- is told apart from damage.

CREATE TABLE data_keys (
    id         text PRIMARY KEY,
    version    bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    purpose    text NOT NULL CHECK (purpose IN ('secrets', 'codec')),
    tenant_id  text,
    kek_id     text NOT NULL,
    wrapped    bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CHECK (purpose = 'codec' OR tenant_id IS NULL)
);

CREATE INDEX data_keys_current ON data_keys (purpose, tenant_id, version DESC);

-- The key a secret is sealed with; NULL only until serve moves the old
-- shared key out of settings (then every row names it). A key in use cannot
-- be deleted: rotation retires a key only once no secret needs it.
ALTER TABLE secrets ADD COLUMN key_id text REFERENCES data_keys (id);
CREATE INDEX secrets_key_id ON secrets (key_id);
