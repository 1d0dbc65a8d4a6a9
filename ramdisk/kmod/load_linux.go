package kmod

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Load loads every module of moddir/modules.dep, dependencies first, with
// finit_module(2). A module the kernel already has counts as loaded. It
// goes on past a module that fails (a driver whose hardware is absent may
// refuse) and returns how many loaded and one error per failure.
func Load(moddir string) (int, []error) {
	f, err := os.Open(filepath.Join(moddir, "modules.dep"))
	if err != nil {
		return 0, []error{fmt.Errorf("no module list: %w", err)}
	}
	deps, err := ParseModulesDep(f)
	f.Close()
	if err != nil {
		return 0, []error{err}
	}
	order, err := deps.LoadOrder()
	if err != nil {
		return 0, []error{err}
	}
	n := 0
	var errs []error
	for _, file := range order {
		if err := loadOne(filepath.Join(moddir, file)); err != nil {
			errs = append(errs, fmt.Errorf("load %s: %w", ModName(file), err))
			continue
		}
		n++
	}
	return n, errs
}

func loadOne(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	err = unix.FinitModule(int(f.Fd()), "", 0)
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	return err
}
