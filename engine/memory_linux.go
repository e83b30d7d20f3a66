package engine

import "syscall"

// physicalMemory returns the machine's RAM: a plan larger than it can never run.
func physicalMemory() int64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil || si.Totalram == 0 {
		return fallbackMaxBytes
	}
	return int64(si.Totalram) * int64(si.Unit)
}
