-- 0006: the names and addresses a site's agent may get serving certificates
-- for, declared at its join (at most 16), and whether the site is a loopback
-- lab (agent and control plane on one host), the only kind of site whose
-- agent may be certified for loopback names.

ALTER TABLE sites
    ADD COLUMN loopback_lab boolean NOT NULL DEFAULT false,
    ADD COLUMN serve_hosts  text[]  NOT NULL DEFAULT '{}'
        CONSTRAINT sites_serve_hosts_bounded CHECK (cardinality(serve_hosts) <= 16);
