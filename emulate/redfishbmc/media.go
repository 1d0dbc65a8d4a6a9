package redfishbmc

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
)

// Virtual media: our own tree gives the Manager a CD drive (where older
// BMCs keep it); a mockup keeps its own drives, under the System for
// public-rackmount1. Either way every drive gets the InsertMedia and
// EjectMedia actions and its Image and Inserted come from drive state.

const (
	insertAction = "/Actions/VirtualMedia.InsertMedia"
	ejectAction  = "/Actions/VirtualMedia.EjectMedia"
)

// drive is one virtual media drive's state, guarded by BMC.mu.
type drive struct {
	image    string
	inserted bool
}

// addManagerMedia adds a CD and a USB stick drive under the manager mgr of our own tree.
func (b *BMC) addManagerMedia(t map[string]map[string]any, mgr string) {
	coll := mgr + "/VirtualMedia"
	t[mgr]["VirtualMedia"] = link(coll)
	drives := map[string][]string{"CD1": {"CD", "DVD"}, "USB1": {"USBStick"}}
	var paths []string
	for id, types := range drives {
		p := coll + "/" + id
		t[p] = map[string]any{
			"@odata.id": p, "@odata.type": "#VirtualMedia.v1_6_0.VirtualMedia", "Id": id, "Name": "Virtual " + id,
			"MediaTypes": types, "ConnectedVia": "URI", "TransferProtocolType": "HTTP",
		}
		paths = append(paths, p)
	}
	sort.Strings(paths)
	t[coll] = collection(coll, "VirtualMediaCollection", "Virtual Media Collection", paths...)
}

// findMedia records every VirtualMedia resource of the tree as a drive,
// with the Image and Inserted the tree gave it.
func (b *BMC) findMedia() {
	b.media = map[string]*drive{}
	for p, res := range b.tree {
		if typ, _ := res["@odata.type"].(string); strings.HasPrefix(typ, "#VirtualMedia.") {
			img, _ := res["Image"].(string)
			in, _ := res["Inserted"].(bool)
			b.media[p] = &drive{image: img, inserted: in && img != ""}
		}
	}
}

// mediaAction returns the drive path and action ("insert" or "eject") of a
// POST path, false when p is no virtual media action.
func (b *BMC) mediaAction(p string) (string, string, bool) {
	for suffix, act := range map[string]string{insertAction: "insert", ejectAction: "eject"} {
		if d, ok := strings.CutSuffix(p, suffix); ok && b.media[d] != nil {
			return d, act, true
		}
	}
	return "", "", false
}

// postMedia answers VirtualMedia.InsertMedia and VirtualMedia.EjectMedia.
func (b *BMC) postMedia(w http.ResponseWriter, r *http.Request, path, act string) {
	var body struct {
		Image    string
		Inserted *bool
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil && act == "insert" {
		writeError(w, http.StatusBadRequest, "Base.1.8.MalformedJSON", "VirtualMedia.InsertMedia needs a JSON body with Image")
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.media[path]
	switch {
	case act == "eject":
		d.image, d.inserted = "", false
		b.m.calls = append(b.m.calls, "media:eject")
	case body.Image == "":
		writeError(w, http.StatusBadRequest, "Base.1.8.ActionParameterMissing", "VirtualMedia.InsertMedia needs Image")
		return
	case d.inserted:
		writeError(w, http.StatusConflict, "Base.1.8.ResourceInUse", "virtual media "+path+" holds an image; eject it first")
		return
	default:
		d.image, d.inserted = body.Image, body.Inserted == nil || *body.Inserted
		b.m.calls = append(b.m.calls, "media:insert:"+body.Image)
	}
	b.log.Info("emulated BMC virtual media", "media", path, "action", act, "image", d.image)
	w.WriteHeader(http.StatusNoContent)
}

// renderMedia returns the drive resource at p with its live state and actions.
func (b *BMC) renderMedia(p string) map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]any, len(b.tree[p])+3)
	for k, v := range b.tree[p] {
		out[k] = v
	}
	d := b.media[p]
	out["Image"], out["Inserted"] = nil, d.inserted
	if d.image != "" {
		out["Image"] = d.image
	}
	out["Actions"] = map[string]any{
		"#VirtualMedia.InsertMedia": map[string]any{"target": p + insertAction},
		"#VirtualMedia.EjectMedia":  map[string]any{"target": p + ejectAction},
	}
	return out
}

// Media reports the image in the BMC's first CD/DVD drive, "" when empty.
func (b *BMC) Media() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var paths []string
	for p := range b.media {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if types := stringList(b.tree[p]["MediaTypes"]); containsAny(types, "CD", "DVD") && b.media[p].inserted {
			return b.media[p].image
		}
	}
	return ""
}

func containsAny(xs []string, want ...string) bool {
	for _, x := range xs {
		for _, w := range want {
			if x == w {
				return true
			}
		}
	}
	return false
}

func (b *BMC) isMediaAction(p string) bool {
	_, _, ok := b.mediaAction(p)
	return ok
}
