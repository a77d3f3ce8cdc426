//go:build unix

package serve

import "syscall"

// raiseOpenFileLimit raises the soft limit on open files to the hard limit
// and returns the new soft limit. (Go's runtime does the same at start on
// most Unix systems since Go 1.19; this makes it explicit and reads the
// result.)
func raiseOpenFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err == nil {
			lim = raised
		}
	}
	return uint64(lim.Cur), nil
}
