// Package migrations holds the database schema of each dialect as numbered
// goose SQL migrations, embedded so the binary carries them. Both dialects
// have the same migrations under the same numbers and names.
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed sqlite/*.sql postgres/*.sql
var files embed.FS

// SQLite and Postgres hold the migration files of each dialect, named
// NNNNN_description.sql, at their root.
var (
	SQLite   = sub("sqlite")
	Postgres = sub("postgres")
)

func sub(dir string) fs.FS {
	f, err := fs.Sub(files, dir)
	if err != nil {
		panic(err) // dir is a constant that go:embed checked
	}
	return f
}
