// Package kmod owns the ramdisk's kernel modules: which file is which module,
// modules.dep (read, written, and put in load order), the dependencies a
// module file declares (its .modinfo), and loading them as PID 1.
package kmod

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
)

// ModName is a module's name as the kernel knows it, from its file name:
// "kernel/drivers/nvme/host/nvme-core.ko" → "nvme_core" (the kernel treats
// '-' and '_' alike in module names and reports '_').
func ModName(file string) string {
	n := path.Base(file)
	for _, ext := range []string{".xz", ".zst", ".gz"} {
		n = strings.TrimSuffix(n, ext)
	}
	return strings.ReplaceAll(strings.TrimSuffix(n, ".ko"), "-", "_")
}

// Deps maps each module's file (relative to /lib/modules/<release>) to the
// files of the modules it needs: modules.dep as depmod writes it.
type Deps map[string][]string

// ParseModulesDep reads modules.dep: one "file: dep dep …" line per module.
func ParseModulesDep(r io.Reader) (Deps, error) {
	d := Deps{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		file, deps, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(file) == "" {
			return nil, fmt.Errorf("modules.dep line %d: %q is not \"module.ko: deps…\"", n, line)
		}
		file = strings.TrimSpace(file)
		if _, dup := d[file]; dup {
			return nil, fmt.Errorf("modules.dep line %d: %s is listed twice", n, file)
		}
		d[file] = strings.Fields(deps)
	}
	return d, sc.Err()
}

// LoadOrder returns the files of want (module names; all of d's modules
// when want is empty) and of everything they need, each once, every module
// after its dependencies. A dependency missing from d, an unknown module or
// a cycle is an error naming it.
func (d Deps) LoadOrder(want ...string) ([]string, error) {
	byName := map[string]string{}
	for f := range d {
		byName[ModName(f)] = f
	}
	if len(want) == 0 {
		for f := range d {
			want = append(want, ModName(f))
		}
		sort.Strings(want)
	}
	state := map[string]int{} // 0 unseen, 1 on the current path, 2 placed
	var order []string
	var visit func(file, from string) error
	visit = func(file, from string) error {
		deps, ok := d[file]
		if !ok {
			return fmt.Errorf("module %s (needed by %s) is not in modules.dep", file, from)
		}
		switch state[file] {
		case 1:
			return fmt.Errorf("modules.dep has a dependency cycle through %s", file)
		case 2:
			return nil
		}
		state[file] = 1
		for _, dep := range deps {
			if err := visit(dep, file); err != nil {
				return err
			}
		}
		state[file] = 2
		order = append(order, file)
		return nil
	}
	for _, name := range want {
		file, ok := byName[strings.ReplaceAll(name, "-", "_")]
		if !ok {
			return nil, fmt.Errorf("module %s is not in modules.dep", name)
		}
		if err := visit(file, "the ramdisk"); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// Format writes d as modules.dep, sorted by file; each module's dependencies
// are listed as depmod lists them, the last one to be loaded first.
func (d Deps) Format(w io.Writer) error {
	files := make([]string, 0, len(d))
	for f := range d {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		line := f + ":"
		if len(d[f]) > 0 {
			line += " " + strings.Join(d[f], " ")
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}
