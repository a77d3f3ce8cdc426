// Package migrations holds the database schema as numbered goose SQL
// migrations, embedded so the binary carries them.
package migrations

import "embed"

// FS holds the migration files, named NNNNN_description.sql, at its root.
//
//go:embed *.sql
var FS embed.FS
