//go:build !linux

package bench

// peakRSS is unknown here: ru_maxrss is in bytes on some systems and KiB on
// others, and absent on Windows; the report leaves it out.
func peakRSS() int64 { return 0 }
