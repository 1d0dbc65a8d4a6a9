//go:build !linux

package ipmibmc

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
