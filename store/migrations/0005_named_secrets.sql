-- 0005: named secrets. A tenant's secret may carry a name (a plain word,
-- unique in the tenant) so it can be referenced as secret://<tenant>/<name>;
-- the secrets the API seals from inline credentials keep none and are
-- referenced by id. updated_at moves when a put replaces the value.

ALTER TABLE secrets
    ADD COLUMN name       text CONSTRAINT secrets_name_word CHECK (name ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();

CREATE UNIQUE INDEX secrets_tenant_name ON secrets (tenant_id, name) WHERE name IS NOT NULL;
