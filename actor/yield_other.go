//go:build !linux

package actor

// osYield does nothing where the kernel's yield is not known to help.
func osYield() {}
