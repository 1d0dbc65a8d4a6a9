package controlplane

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/better-compute/better-compute/workflows"
)

// PrintBanner tells the operator where everything is.
func (cp *ControlPlane) PrintBanner(out io.Writer, took time.Duration) {
	fmt.Fprintf(out, "better-compute control plane started in %s\n", took.Round(time.Millisecond))
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	if cp.apiURL != "" {
		fmt.Fprintf(w, "  API\t%s\n", cp.apiURL)
	} else {
		fmt.Fprintf(w, "  API\tnot served by this process (--only %s)\n", cp.cfg.Only)
	}
	if cp.cfg.Only == OnlyAPI {
		fmt.Fprintf(w, "  Worker\tnot run by this process (--only api)\n")
	} else {
		fmt.Fprintf(w, "  Worker\ttask queue %s\n", workflows.ControlPlaneQueue)
	}
	mode := "external"
	if cp.temporal != nil {
		mode = "embedded, " + cp.cfg.DataDir + "/temporal.db"
		if cp.temporal.ClientTLS() != nil {
			mode += "; mTLS, client certificates from " + cp.CAFile() + ", sites confined to their own task queue"
		} else {
			mode += "; plain, no CA: whoever reaches it may do anything"
		}
	}
	fmt.Fprintf(w, "  Temporal\t%s (namespace %s; %s)\n", cp.TemporalAddress(), cp.cfg.TemporalNamespace, mode)
	if cp.temporal != nil && cp.temporal.UIURL() != "" {
		access := "read-only"
		if cp.cfg.UIWriteActions {
			access = "write actions for root"
		}
		fmt.Fprintf(w, "  Temporal UI\t%s/namespaces/%s/workflows (log in with the root token; %s)\n", cp.temporal.UIURL(), cp.cfg.TemporalNamespace, access)
	}
	if cp.pg != nil {
		fmt.Fprintf(w, "  PostgreSQL\tprivate cluster in %s/postgres\n", cp.cfg.DataDir)
	} else {
		fmt.Fprintf(w, "  PostgreSQL\t--database-url\n")
	}
	switch {
	case cp.agentsURL != "":
		fmt.Fprintf(w, "  Agents\t%s (TLS; CA %s)\n", cp.agentsURL, cp.CAFile())
	case cp.ca == nil:
		fmt.Fprintf(w, "  Agents\tno CA in %s: run `better-compute pki init --trust-domain <domain>` to admit agents\n", cp.cfg.PKIDir)
	}
	fmt.Fprintf(w, "  Data dir\t%s\n", cp.cfg.DataDir)
	fmt.Fprintf(w, "  Root token\t%s (mode 0600; the CLI reads it from --data-dir)\n", cp.tokenPath)
	w.Flush()
}
