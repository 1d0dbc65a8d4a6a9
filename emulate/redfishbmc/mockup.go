package redfishbmc

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/better-compute/better-compute/errs"
)

// loadMockup seeds the tree from a DMTF mockup directory (index.json per
// resource, the directory being /redfish/v1) and makes its first system this
// machine.
func (b *BMC) loadMockup(dir string) error {
	t := map[string]map[string]any{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "index.json" {
			return err
		}
		rel, err := filepath.Rel(dir, filepath.Dir(p))
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var res map[string]any
		if err := json.Unmarshal(data, &res); err != nil {
			return errs.Wrap(errs.InvalidInput, err, "mockup resource %s is not a JSON object", p)
		}
		key := rootPath
		if rel != "." {
			key += "/" + filepath.ToSlash(rel)
		}
		t[key] = res
		return nil
	})
	if err != nil {
		return errs.Wrap(errs.InvalidInput, err, "cannot read the Redfish mockup in %s", dir)
	}
	b.tree = t
	return b.adoptSystem(dir)
}

// adoptSystem finds the mockup's first system and rewrites it to this machine.
func (b *BMC) adoptSystem(dir string) error {
	root, ok := b.tree[rootPath]
	if !ok {
		return errs.New(errs.InvalidInput, "mockup %s has no service root (index.json)", dir)
	}
	b.sessionsPath = defaultSessions
	if s := odataID(dig(root, "Links", "Sessions")); s != "" {
		b.sessionsPath = s
	}
	members := memberPaths(b.tree[odataID(root["Systems"])])
	if len(members) == 0 {
		return errs.New(errs.InvalidInput, "mockup %s has no computer system", dir)
	}
	b.systemPath = members[0]
	sys, ok := b.tree[b.systemPath]
	if !ok {
		return errs.New(errs.InvalidInput, "mockup %s lists system %s but has no resource for it", dir, b.systemPath)
	}
	sys["UUID"], sys["SerialNumber"] = b.cfg.UUID, b.cfg.Serial
	b.resetTypes = allResetTypes()
	b.resetPath = b.systemPath + "/Actions/ComputerSystem.Reset"
	if reset, ok := dig(sys, "Actions", "#ComputerSystem.Reset").(map[string]any); ok {
		if s, ok := reset["target"].(string); ok && s != "" {
			b.resetPath = trimSlash(s)
		}
		if v := stringList(reset["ResetType@Redfish.AllowableValues"]); v != nil {
			b.resetTypes = v
		}
	}
	b.bootTargets = defaultBootTargets()
	if v := stringList(dig(sys, "Boot", "BootSourceOverrideTarget@Redfish.AllowableValues")); v != nil {
		b.bootTargets = v
	}
	if len(b.cfg.MACs) > 0 || b.cfg.HideNICs {
		b.rewriteNICs(odataID(sys["EthernetInterfaces"]))
	}
	return nil
}

// rewriteNICs makes the system's EthernetInterfaces exactly this machine's
// MACs: the mockup's first interfaces get them in order, more are cloned from
// the first, and the rest are dropped.
func (b *BMC) rewriteNICs(collPath string) {
	coll := b.tree[collPath]
	if coll == nil {
		collPath = b.systemPath + "/EthernetInterfaces"
		coll = collection(collPath, "EthernetInterfaceCollection", "Ethernet Interface Collection")
		b.tree[collPath] = coll
		b.tree[b.systemPath]["EthernetInterfaces"] = link(collPath)
	}
	old := memberPaths(coll)
	var template map[string]any
	if len(old) > 0 {
		template = b.tree[old[0]]
	}
	macs := b.cfg.reportedMACs()
	members := make([]any, len(macs))
	for i, mac := range macs {
		p := collPath + "/" + strings.ToUpper(strings.ReplaceAll(mac, ":", ""))
		nic := map[string]any{}
		for k, v := range template {
			nic[k] = v
		}
		if i < len(old) {
			p, nic = old[i], b.tree[old[i]]
		}
		nic["@odata.id"], nic["Id"] = p, p[strings.LastIndexByte(p, '/')+1:]
		nic["MACAddress"], nic["PermanentMACAddress"] = strings.ToUpper(mac), strings.ToUpper(mac)
		b.tree[p] = nic
		members[i] = link(p)
	}
	for _, p := range old[min(len(old), len(members)):] {
		delete(b.tree, p)
	}
	coll["Members"], coll["Members@odata.count"] = members, len(members)
}

// dig walks nested JSON objects by key.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// odataID returns the @odata.id of a link object, without a trailing slash.
func odataID(v any) string {
	s, _ := dig(v, "@odata.id").(string)
	return trimSlash(s)
}

func memberPaths(coll map[string]any) []string {
	ms, _ := coll["Members"].([]any)
	var out []string
	for _, m := range ms {
		if p := odataID(m); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// stringList converts a JSON array of strings; nil when v is not one.
func stringList(v any) []string {
	switch a := v.(type) {
	case []string:
		return append([]string(nil), a...)
	case []any:
		out := make([]string, 0, len(a))
		for _, x := range a {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func trimSlash(p string) string {
	if len(p) > 1 {
		return strings.TrimSuffix(p, "/")
	}
	return p
}
