package qemu

import "syscall"

// sysProcAttr kills QEMU when the process that started it dies, so a
// crashed test or site leaves no machine running.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
