package main

import "runtime"

// withLockedThread runs f with its goroutine locked to one OS thread, so that
// photon's thread-local last error message read inside f belongs to the call
// that f made.
func withLockedThread(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return f()
}
