//go:build fakehw

package demo_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/demo"
	"github.com/better-compute/better-compute/internal/tracing"
	"github.com/better-compute/better-compute/internal/tracing/tracingtest"
)

// TestTraceOfADeploy: with tracing on (tracing.Start from the standard
// environment, pointed at an in-process OTLP/HTTP receiver), one deploy is
// one trace: the API call, the workflow it starts, each activity the
// workflow runs, and each command relayed to the ramdisk, each span the
// child of the one before it, ids checked, not names.
func TestTraceOfADeploy(t *testing.T) {
	rcv := tracingtest.Start()
	t.Cleanup(rcv.Close)
	ctx := ctxFor(t, 6*time.Minute)
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL()}
	tp, shutdown, err := tracing.Start(ctx, tracing.FromEnv(func(k string) string { return env[k] }, "demo"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = shutdown(context.Background()) })
	d := startWith(t, func(c *demo.Config) { c.Machines, c.Tracer = 1, tp })
	m := d.Rack.Machines()[0]
	node, err := d.Enroll(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(ctx, m.Name, node, "ready", 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := d.API.Metal.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: node, Profile: d.Profile, ProfileVersion: 1})); err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(ctx, m.Name, node, "deployed", 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	spans := deployTrace(t, tp.(*sdktrace.TracerProvider), rcv)
	t.Logf("the deploy's trace:\n%s", render(spans))

	// Every span's parent, by id: a name alone would pass with broken links.
	byID := map[string]tracingtest.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	var edges []string
	for _, s := range spans {
		p, ok := byID[s.ParentID]
		switch {
		case s.ParentID == "":
			edges = append(edges, "(root) → "+s.Name)
		case !ok:
			t.Errorf("span %s (%s) has parent %s, not in the trace", s.Name, s.SpanID, s.ParentID)
		default:
			edges = append(edges, p.Name+" → "+s.Name)
		}
	}
	edges = slices.Compact(sortedCopy(edges))
	// Each activity the workflow scheduled ran as that schedule's child.
	ran := map[string]bool{}
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "RunActivity:") {
			ran[s.ParentID] = true
		}
	}
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "StartActivity:") && !ran[s.SpanID] {
			t.Errorf("%s (%s) has no RunActivity child", s.Name, s.SpanID)
		}
	}
	// Deduplicated parent → child edges, spelled out: the API call starts
	// the workflow, the workflow each activity (control-plane and site),
	// each activity runs as its StartActivity's child, and the two ramdisk
	// commands of a deploy run under their activity on the site and then on
	// the ramdisk.
	want := []string{
		"(root) → bettercompute.v1.MetalService/Deploy",
		"RunActivity:boot.kexec → relay boot.kexec",
		"RunActivity:deploy.image → relay deploy.image",
		"RunWorkflow:metal.deploy → StartActivity:boot.kexec",
		"RunWorkflow:metal.deploy → StartActivity:boot.setEntry",
		"RunWorkflow:metal.deploy → StartActivity:cache.ensureImage",
		"RunWorkflow:metal.deploy → StartActivity:command.flush",
		"RunWorkflow:metal.deploy → StartActivity:command.queue",
		"RunWorkflow:metal.deploy → StartActivity:deploy.image",
		"RunWorkflow:metal.deploy → StartActivity:image.get",
		"RunWorkflow:metal.deploy → StartActivity:join.issueDiscoveryToken",
		"RunWorkflow:metal.deploy → StartActivity:management.setBootDevice",
		"RunWorkflow:metal.deploy → StartActivity:node.get",
		"RunWorkflow:metal.deploy → StartActivity:node.recordDeployment",
		"RunWorkflow:metal.deploy → StartActivity:node.transition",
		"RunWorkflow:metal.deploy → StartActivity:power.setPower",
		"RunWorkflow:metal.deploy → StartActivity:profile.get",
		"StartActivity:boot.kexec → RunActivity:boot.kexec",
		"StartActivity:boot.setEntry → RunActivity:boot.setEntry",
		"StartActivity:cache.ensureImage → RunActivity:cache.ensureImage",
		"StartActivity:command.flush → RunActivity:command.flush",
		"StartActivity:command.queue → RunActivity:command.queue",
		"StartActivity:deploy.image → RunActivity:deploy.image",
		"StartActivity:image.get → RunActivity:image.get",
		"StartActivity:join.issueDiscoveryToken → RunActivity:join.issueDiscoveryToken",
		"StartActivity:management.setBootDevice → RunActivity:management.setBootDevice",
		"StartActivity:node.get → RunActivity:node.get",
		"StartActivity:node.recordDeployment → RunActivity:node.recordDeployment",
		"StartActivity:node.transition → RunActivity:node.transition",
		"StartActivity:power.setPower → RunActivity:power.setPower",
		"StartActivity:profile.get → RunActivity:profile.get",
		"StartWorkflow:metal.deploy → RunWorkflow:metal.deploy",
		"bettercompute.v1.MetalService/Deploy → StartWorkflow:metal.deploy",
		"relay boot.kexec → ramdisk boot.kexec",
		"relay deploy.image → ramdisk deploy.image",
	}
	if diff := cmp.Diff(want, edges); diff != "" {
		t.Errorf("the deploy trace's parent → child edges (-want +got):\n%s", diff)
	}
}

// deployTrace flushes until the deploy workflow's span (ended just after
// the node reached deployed) has arrived, and returns the spans of its trace.
func deployTrace(t *testing.T, tp *sdktrace.TracerProvider, rcv *tracingtest.Receiver) []tracingtest.Span {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := tp.ForceFlush(context.Background()); err != nil {
			t.Fatalf("ForceFlush = %v", err)
		}
		var trace string
		for _, s := range rcv.Spans() {
			if s.Name == "RunWorkflow:metal.deploy" {
				trace = s.TraceID
			}
		}
		if trace != "" {
			var out []tracingtest.Span
			for _, s := range rcv.Spans() {
				if s.TraceID == trace {
					out = append(out, s)
				}
			}
			return out
		}
		if time.Now().After(deadline) {
			names := map[string]int{}
			for _, s := range rcv.Spans() {
				names[s.Name]++
			}
			t.Fatalf("no RunWorkflow:metal.deploy span after 30s; received %v", names)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// render draws the trace as an indented tree in start order.
func render(spans []tracingtest.Span) string {
	kids := map[string][]tracingtest.Span{}
	for _, s := range spans {
		kids[s.ParentID] = append(kids[s.ParentID], s)
	}
	var b strings.Builder
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		k := kids[parent]
		sort.Slice(k, func(i, j int) bool { return k[i].Start.Before(k[j].Start) })
		for _, s := range k {
			fmt.Fprintf(&b, "%s%s [%s]\n", strings.Repeat("  ", depth), s.Name, s.Service)
			walk(s.SpanID, depth+1)
		}
	}
	walk("", 0)
	return b.String()
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
