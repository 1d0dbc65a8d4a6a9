-- 0012: the steps the running workers serve, as each published them
-- (sdk.Descriptor JSON): a site's agent at each announce (site_id), a
-- control-plane worker at each start (site_id NULL; worker names its
-- plugins, so workers built with different plugins each keep theirs). A
-- publisher's rows are replaced wholesale each time. Profiles are resolved
-- against them, so a step no worker runs is refused before anything moves.

CREATE TABLE published_steps (
    site_id      text        CONSTRAINT published_steps_site_fk REFERENCES sites (id) ON DELETE CASCADE,
    worker       text        NOT NULL DEFAULT '',
    step_id      text        NOT NULL,
    descriptor   jsonb       NOT NULL,
    published_at timestamptz NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX published_steps_key ON published_steps (COALESCE(site_id, ''), worker, step_id);
