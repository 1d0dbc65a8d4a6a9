package ipmibmc

import "syscall"

// sysProcAttr kills ipmi_sim when the process that started it dies, so a
// crashed rack or test leaves no BMC answering.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
