package kmod

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
)

// Modinfo is what a module file declares about itself in its .modinfo
// section (what modinfo(8) prints).
type Modinfo struct {
	Name    string   // name=
	Depends []string // depends=, module names
}

// ReadModinfo reads the .modinfo section of an uncompressed module file.
func ReadModinfo(file string) (Modinfo, error) {
	f, err := elf.Open(file)
	if err != nil {
		return Modinfo{}, fmt.Errorf("%s is not a kernel module (an ELF file): %w", file, err)
	}
	defer f.Close()
	s := f.Section(".modinfo")
	if s == nil {
		return Modinfo{}, fmt.Errorf("%s has no .modinfo section; is it a kernel module?", file)
	}
	b, err := s.Data()
	if err != nil {
		return Modinfo{}, fmt.Errorf("read .modinfo of %s: %w", file, err)
	}
	return ParseModinfo(b), nil
}

// ParseModinfo reads a .modinfo section: NUL-separated key=value strings.
func ParseModinfo(b []byte) Modinfo {
	var m Modinfo
	for _, kv := range bytes.Split(b, []byte{0}) {
		k, v, ok := strings.Cut(string(kv), "=")
		if !ok {
			continue
		}
		switch k {
		case "name":
			m.Name = v
		case "depends":
			for _, d := range strings.Split(v, ",") {
				if d = strings.TrimSpace(d); d != "" {
					m.Depends = append(m.Depends, strings.ReplaceAll(d, "-", "_"))
				}
			}
		}
	}
	return m
}

// Resolve finds want (module names) and everything they depend on under
// moddir (/lib/modules/<release> of an extracted kernel package, which has
// no modules.dep before depmod runs) and returns their modules.dep, with
// files relative to moddir. A module that is not there is an error naming it.
func Resolve(moddir string, want []string) (Deps, error) {
	files, err := index(moddir)
	if err != nil {
		return nil, err
	}
	return resolve(files, want, func(file string) (Modinfo, error) { return ReadModinfo(filepath.Join(moddir, file)) })
}

// resolve walks the dependencies of want through files (module name →
// file) and read (a file's .modinfo).
func resolve(files map[string]string, want []string, read func(file string) (Modinfo, error)) (Deps, error) {
	direct := Deps{}
	queue := append([]string(nil), want...)
	for len(queue) > 0 {
		name := strings.ReplaceAll(queue[0], "-", "_")
		queue = queue[1:]
		file, ok := files[name]
		if !ok {
			return nil, fmt.Errorf("module %s is not in the kernel package's module tree", name)
		}
		if _, done := direct[file]; done {
			continue
		}
		mi, err := read(file)
		if err != nil {
			return nil, err
		}
		direct[file] = []string{}
		for _, dep := range mi.Depends {
			dep = strings.ReplaceAll(dep, "-", "_")
			f, ok := files[dep]
			if !ok {
				return nil, fmt.Errorf("module %s depends on %s, which is not in the kernel package's module tree", name, dep)
			}
			direct[file] = append(direct[file], f)
			queue = append(queue, dep)
		}
	}
	return direct.closed()
}

// closed turns direct dependencies into modules.dep's: every module's
// transitive dependencies, the one to load last first.
func (d Deps) closed() (Deps, error) {
	out := Deps{}
	for file := range d {
		order, err := d.LoadOrder(ModName(file))
		if err != nil {
			return nil, err
		}
		deps := []string{}
		for i := len(order) - 2; i >= 0; i-- { // order ends with file itself
			deps = append(deps, order[i])
		}
		out[file] = deps
	}
	return out, nil
}

// index maps module names to their files (relative, slash-separated) under moddir.
func index(moddir string) (map[string]string, error) {
	files := map[string]string{}
	err := filepath.WalkDir(moddir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".ko") {
			return err
		}
		rel, err := filepath.Rel(moddir, p)
		if err != nil {
			return err
		}
		files[ModName(rel)] = filepath.ToSlash(rel)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the modules under %s: %w", moddir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no .ko modules under %s; is this an extracted kernel package's /lib/modules/<release>?", moddir)
	}
	return files, nil
}

// Files returns d's module files, sorted.
func (d Deps) Files() []string {
	out := make([]string, 0, len(d))
	for f := range d {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}
