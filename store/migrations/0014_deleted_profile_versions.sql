-- 0014: a deleted profile version keeps its number. Versions are immutable:
-- a node deployed with ubuntu v2 names the document it ran, so profiles
-- delete records the number here and profiles create refuses it.

CREATE TABLE deleted_profile_versions (
    tenant_id  text        NOT NULL CONSTRAINT deleted_profile_versions_tenant_fk REFERENCES tenants (id),
    id         text        NOT NULL,
    version    integer     NOT NULL,
    deleted_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT deleted_profile_versions_pkey PRIMARY KEY (tenant_id, id, version)
);
