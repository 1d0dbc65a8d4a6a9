package pxe

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/siteagent/boot"
)

// benchMACs is how many machines perfdhcp plays, each with a ramdisk
// entry in our table and a dhcp-host line in dnsmasq's configuration.
const benchMACs = 64

// BenchmarkProxyDHCP runs perfdhcp (Kea's) in the client namespace
// against our proxy and then dnsmasq's proxy mode on the same address,
// with the same machines, DISCOVER → OFFER on port 67 only (-i): what both
// answer alike (dnsmasq names the boot file only later, on 4011, so full
// PXE exchanges are not comparable). Two runs per server: a saturating one
// for offers per second, a moderate one for the latency of one answer.
func BenchmarkProxyDHCP(b *testing.B) {
	for range b.N {
		runProxyBench(b)
	}
}

// perfRun is one perfdhcp run's outcome.
type perfRun struct {
	sent, received int
	rate           float64   // offers received per second of the run
	delays         []float64 // ms, one per successful exchange
}

func runProxyBench(b *testing.B) {
	needLab(b, "perfdhcp")
	l := newLab(b)
	dir := b.TempDir()
	macs, table := benchTable(b, dir)
	const satRate, latRate, seconds = 20000, 500, 5
	results := map[string][2]perfRun{}
	for _, who := range []string{"ours", "dnsmasq"} {
		var p *proc
		if who == "ours" {
			p, _ = l.serveOurs(table, "BCPX_LOG=warn")
		} else {
			p = l.startBenchDnsmasq(macs)
		}
		sat := l.perfdhcp(b, dir, satRate, seconds)
		lat := l.perfdhcp(b, dir, latRate, seconds)
		p.stop()
		results[who] = [2]perfRun{sat, lat}
	}
	report(b, results)
}

func report(b *testing.B, r map[string][2]perfRun) {
	for _, who := range []string{"ours", "dnsmasq"} {
		sat, lat := r[who][0], r[who][1]
		b.ReportMetric(sat.rate, who+"-offers/s")
		b.ReportMetric(float64(sat.sent-sat.received)/float64(max(sat.sent, 1))*100, who+"-drop%")
		b.ReportMetric(percentile(lat.delays, 50), who+"-p50-ms")
		b.ReportMetric(percentile(lat.delays, 99), who+"-p99-ms")
		b.Logf("%s: saturating run sent %d, got %d offers (%.0f/s); latency run sent %d, got %d", who,
			sat.sent, sat.received, sat.rate, lat.sent, lat.received)
	}
	o, d := r["ours"], r["dnsmasq"]
	b.ReportMetric(o[0].rate/d[0].rate, "offers-ours/dnsmasq")
	b.ReportMetric(percentile(o[1].delays, 50)/percentile(d[1].delays, 50), "p50-ours/dnsmasq")
	b.ReportMetric(percentile(o[1].delays, 99)/percentile(d[1].delays, 99), "p99-ours/dnsmasq")
}

func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p/100))]
}

// benchTable writes benchMACs ramdisk entries and perfdhcp's MAC list.
func benchTable(b *testing.B, dir string) ([]string, string) {
	path := filepath.Join(dir, "boot.json")
	tab, err := boot.Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	var macs []string
	for i := range benchMACs {
		mac := fmt.Sprintf("52:54:00:be:00:%02x", i)
		macs = append(macs, mac)
		if err := tab.SetEntry(kinds.BootEntry{NodeID: fmt.Sprintf("node_%d", i), MACs: []string{mac}, Ramdisk: true, DiscoveryToken: "t"}); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "macs"), []byte(strings.Join(macs, "\n")+"\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	return macs, path
}

// startBenchDnsmasq is the reference: proxy mode, the same machines known,
// the others ignored, and like ours (at warn) no log line per answer.
func (l *lab) startBenchDnsmasq(macs []string) *proc {
	args := append(l.dnsmasqBase(), "--dhcp-range=10.77.0.0,proxy", "--dhcp-ignore=tag:!rd", "--quiet-dhcp",
		`--pxe-service=x86PC,"bc",undionly.kpxe`, `--pxe-service=X86-64_EFI,"bc",snponly.efi`)
	args = slices.DeleteFunc(args, func(a string) bool { return a == "--log-dhcp" })
	for _, m := range macs {
		args = append(args, "--dhcp-host="+m+",set:rd")
	}
	p := l.start("srv", nil, args...)
	if _, err := p.waitFor(dnsmasqReady, 10*time.Second); err != nil {
		l.t.Fatalf("dnsmasq: %v", err)
	}
	return p
}

var (
	perfSent     = regexp.MustCompile(`(?m)^sent packets: (\d+)`)
	perfReceived = regexp.MustCompile(`(?m)^received packets: (\d+)`)
	// -x t prints each successful exchange's send and receive times, in
	// seconds.
	perfTimes = regexp.MustCompile(`(?m)^sent / received: ([0-9.]+) / ([0-9.]+)$`)
)

// perfdhcp sends DISCOVERs from the client namespace at rate per second
// for seconds, as PXE firmware (options 60, 93, 97), each from a MAC of
// the list, and reads what came back.
func (l *lab) perfdhcp(b *testing.B, dir string, rate, seconds int) perfRun {
	uuid := hex.EncodeToString([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	// One thread when measuring latency: perfdhcp's receiving thread
	// would otherwise spin on one of the two cores the servers need.
	mode := "multi"
	if rate < 1000 {
		mode = "single"
	}
	out, err := l.run(time.Duration(seconds+30)*time.Second, "client", "perfdhcp", "-4", "-l", "eth0", "-i", "-g", mode,
		"-r", strconv.Itoa(rate), "-p", strconv.Itoa(seconds), "-M", filepath.Join(dir, "macs"),
		"-o", "60,"+hex.EncodeToString([]byte("PXEClient:Arch:00000:UNDI:002001")), "-o", "93,0000", "-o", "97,"+uuid,
		"-x", "t")
	_ = err // perfdhcp exits non-zero when any packet was dropped
	r := perfRun{}
	for _, m := range perfTimes.FindAllStringSubmatch(string(out), -1) {
		sent, _ := strconv.ParseFloat(m[1], 64)
		got, _ := strconv.ParseFloat(m[2], 64)
		r.delays = append(r.delays, (got-sent)*1000)
	}
	b.Logf("perfdhcp -r %d:\n%s", rate, perfTimes.ReplaceAllString(string(out), ""))
	if m := perfSent.FindStringSubmatch(string(out)); m != nil {
		r.sent, _ = strconv.Atoi(m[1])
	}
	if m := perfReceived.FindStringSubmatch(string(out)); m != nil {
		r.received, _ = strconv.Atoi(m[1])
	}
	r.rate = float64(r.received) / float64(seconds)
	return r
}
