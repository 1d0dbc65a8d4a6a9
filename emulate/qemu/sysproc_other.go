//go:build !linux

package qemu

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
