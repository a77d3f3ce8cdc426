//go:build unix

package serve

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// checkWritable reports why the database file at path could not be opened
// for writing, or created, with its journal files beside it: SQLite's own
// error names the last system call that failed, which is often an
// unrelated lookup ("no such file or directory" on a read-only file
// system).
func checkWritable(path string) error {
	const wOK = 0x2 // access(2)'s W_OK
	dir := filepath.Dir(path)
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("directory %s does not exist", dir)
	case err != nil:
		return err
	case !info.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	// SQLite creates the file and its -wal and -shm files in dir.
	if err := syscall.Access(dir, wOK); err != nil {
		return fmt.Errorf("cannot write in directory %s: %w", dir, err)
	}
	info, err = os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // serve creates it
	case err != nil:
		return err
	case info.IsDir():
		return fmt.Errorf("%s is a directory", path)
	}
	if err := syscall.Access(path, wOK); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}
