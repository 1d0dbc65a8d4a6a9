-- 0009: how a node's BMC certificate is trusted (enroll --bmc-ca-file,
-- --bmc-tls-pin, --bmc-insecure): {"caPem", "spkiPin", "insecure"} as bmc.TLS
-- marshals it; {} verifies against the site agent's system roots. Public
-- values only: a CA certificate, a key's hash, a flag.
ALTER TABLE metal_nodes ADD COLUMN bmc_tls jsonb NOT NULL DEFAULT '{}';
