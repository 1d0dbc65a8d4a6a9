-- 0011: the BMC drivers a site's agent announced at its last start, so
-- enroll refuses a node the site cannot drive before it exists. Empty: no
-- agent announced yet, nothing is checked.

ALTER TABLE sites ADD COLUMN bmc_drivers text[] NOT NULL DEFAULT '{}'
    CONSTRAINT sites_bmc_drivers_bounded CHECK (cardinality(bmc_drivers) <= 8);
