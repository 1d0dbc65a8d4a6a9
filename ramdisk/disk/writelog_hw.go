//go:build !fakehw

package disk

// logWrites returns t as it is: only the fakehw build keeps a write log of
// its fake disks (see writelog_fakehw.go).
func logWrites(t *target) (blockDev, func(), error) { return t, func() {}, nil }
