-- 0001: tenants and their API tokens, sites and site tokens, pools, images and
-- provision profiles. Every object carries tenant_id; objects that refer to
-- another one do so by (tenant_id, id), so a reference can never cross tenants.

CREATE TABLE tenants (
    id         text        PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_tokens (
    id         text        PRIMARY KEY,
    tenant_id  text        NOT NULL CONSTRAINT api_tokens_tenant_fk REFERENCES tenants (id),
    name       text        NOT NULL,
    hash       bytea       NOT NULL CONSTRAINT api_tokens_hash_key UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);

CREATE TABLE sites (
    id         text        PRIMARY KEY,
    tenant_id  text        NOT NULL CONSTRAINT sites_tenant_fk REFERENCES tenants (id),
    kind       text        NOT NULL,
    region     text        NOT NULL,
    key        text,       -- idempotency key; NULL when none was given
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT sites_tenant_id_key UNIQUE (tenant_id, id),
    CONSTRAINT sites_tenant_key_key UNIQUE (tenant_id, key)
);

CREATE TABLE site_tokens (
    id         text        PRIMARY KEY,
    tenant_id  text        NOT NULL,
    site_id    text        NOT NULL,
    key        text,
    hash       bytea       NOT NULL CONSTRAINT site_tokens_hash_key UNIQUE,
    expires_at timestamptz NOT NULL,
    used_at    timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT site_tokens_tenant_key_key UNIQUE (tenant_id, key),
    CONSTRAINT site_tokens_site_fk FOREIGN KEY (tenant_id, site_id) REFERENCES sites (tenant_id, id)
);

CREATE TABLE pools (
    id         text        PRIMARY KEY,
    tenant_id  text        NOT NULL,
    site_id    text        NOT NULL,
    class      text        NOT NULL,
    agent      text        NOT NULL,
    policy     jsonb       NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT pools_tenant_id_key UNIQUE (tenant_id, id),
    CONSTRAINT pools_site_fk FOREIGN KEY (tenant_id, site_id) REFERENCES sites (tenant_id, id)
);

CREATE INDEX pools_site_idx ON pools (tenant_id, site_id, id);

CREATE TABLE images (
    id          text        PRIMARY KEY,
    tenant_id   text        NOT NULL CONSTRAINT images_tenant_fk REFERENCES tenants (id),
    name        text        NOT NULL,
    source      text        NOT NULL,
    digest      text        NOT NULL,
    format      text        NOT NULL,
    compression text        NOT NULL,
    size        bigint      NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT images_tenant_id_key UNIQUE (tenant_id, id)
);

CREATE TABLE profiles (
    tenant_id  text        NOT NULL CONSTRAINT profiles_tenant_fk REFERENCES tenants (id),
    id         text        NOT NULL,
    version    integer     NOT NULL CHECK (version > 0),
    document   jsonb       NOT NULL,
    visibility text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT profiles_pkey PRIMARY KEY (tenant_id, id, version)
);
