//go:build fakehw

package emulate

// fakeHW says this binary enumerates fake disks (built with -tags fakehw).
const fakeHW = true
