//go:build !unix

package serve

// checkWritable leaves the diagnosis to SQLite where access(2) is missing.
func checkWritable(string) error { return nil }
