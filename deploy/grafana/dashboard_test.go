// Package grafana holds the Grafana dashboard of better-compute's metrics
// (dashboard.json, shipped in the Debian package); its test keeps the
// dashboard's queries on the metric families the code declares.
package grafana

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// metricsDir is the package that declares every better_compute_ family.
const metricsDir = "../../internal/metrics"

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name, Type string
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type, UID string
	} `json:"datasource"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

var metricName = regexp.MustCompile(`better_compute_[a-zA-Z0-9_]*`)

// TestDashboardQueriesKnownMetrics fails when a query of dashboard.json
// names a series no code declares (a family renamed or removed, a typo, a
// histogram's _bucket on a counter), and checks the dashboard is one Grafana
// imports: unique panel ids, every query panel on the ${datasource} variable.
func TestDashboardQueriesKnownMetrics(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dashboard.json does not parse: %v", err)
	}
	series := declaredSeries(t, metricsDir)
	if len(series) == 0 {
		t.Fatalf("declaredSeries(%s) found no better_compute_ family", metricsDir)
	}
	if d.UID == "" || d.Title == "" || !slices.ContainsFunc(d.Templating.List, func(v struct{ Name, Type string }) bool {
		return v.Name == "datasource" && v.Type == "datasource"
	}) {
		t.Errorf("dashboard uid %q, title %q, templating %+v; want a uid, a title and a datasource variable", d.UID, d.Title, d.Templating.List)
	}
	shown := map[string]bool{} // families
	ids := map[int]string{}
	for _, p := range d.Panels {
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panel id %d used by %q and %q", p.ID, other, p.Title)
		}
		ids[p.ID] = p.Title
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: datasource %+v, %d targets; want ${datasource} and at least one query", p.Title, p.Datasource, len(p.Targets))
		}
		for _, tg := range p.Targets {
			names := metricName.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q query %s = %q names no better_compute_ metric", p.Title, tg.RefID, tg.Expr)
			}
			for _, n := range names {
				shown[series[n]] = true
				if series[n] == "" {
					t.Errorf("panel %q query %s uses %s; internal/metrics declares no such series (have %v)", p.Title, tg.RefID, n, keys(series))
				}
			}
		}
	}
	for _, n := range keys(series) {
		if fam := series[n]; !shown[fam] {
			shown[fam] = true
			t.Logf("no panel shows %s yet", fam)
		}
	}
}

// declaredSeries reads the Go files of dir (not its tests) and returns the
// series names its families are exposed under: the Name of each
// prometheus.{Counter,Gauge,Histogram,Summary}Opts literal (with _bucket,
// _sum and _count for histograms, summaries' quantiles under the name
// itself) and the first argument of each prometheus.NewDesc, when they start
// with better_compute_; each mapped to its family. A name given as a
// constant of the package is resolved.
func declaredSeries(t *testing.T, dir string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	paths, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	consts := stringConsts(files)
	value := func(e ast.Expr) string {
		switch e := e.(type) {
		case *ast.BasicLit:
			s, _ := strconv.Unquote(e.Value)
			return s
		case *ast.Ident:
			return consts[e.Name]
		}
		return ""
	}
	out := map[string]string{}
	add := func(name string, suffixes ...string) {
		if !strings.HasPrefix(name, "better_compute_") {
			return
		}
		if len(suffixes) == 0 {
			out[name] = name
		}
		for _, s := range suffixes {
			out[name+s] = name
		}
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				kind := prometheusSel(n.Type)
				for _, el := range n.Elts {
					kv, ok := el.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					if k, _ := kv.Key.(*ast.Ident); k == nil || k.Name != "Name" {
						continue
					}
					switch kind {
					case "CounterOpts", "GaugeOpts":
						add(value(kv.Value))
					case "HistogramOpts":
						add(value(kv.Value), "_bucket", "_sum", "_count")
					case "SummaryOpts":
						add(value(kv.Value), "", "_sum", "_count")
					}
				}
			case *ast.CallExpr:
				if prometheusSel(n.Fun) == "NewDesc" && len(n.Args) > 0 {
					add(value(n.Args[0]))
				}
			}
			return true
		})
	}
	return out
}

// prometheusSel returns X of an expression prometheus.X, else "".
func prometheusSel(e ast.Expr) string {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "prometheus" {
		return sel.Sel.Name
	}
	return ""
}

// stringConsts returns the package's string constants given as literals.
func stringConsts(files []*ast.File) map[string]string {
	out := map[string]string{}
	for _, f := range files {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							out[name.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			}
		}
	}
	return out
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
