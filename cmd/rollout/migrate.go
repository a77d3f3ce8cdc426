package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/rollout/rollout/cmd/internal/serve"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store"
)

const migrateUsage = `usage: rollout migrate --from SOURCE --to TARGET

Copies a whole database from SOURCE into TARGET, whose tables must be
empty: every table the schema holds, row by row and column by column
(features and segments with their whole history, tokens active and
revoked, evaluation counts per bucket and per rule, ramps, settings,
change requests, the audit trail, webhooks with their secrets and
deliveries, the change feed and its revision, sessions signed out,
idempotency keys), but the readiness probe's row and the migration and
sequence bookkeeping, which TARGET keeps its own of. IDs, times and
sequences are kept, so TARGET goes on where SOURCE stands. It writes TARGET
in one transaction (a failure writes nothing), then compares every copied
table of both and exits non-zero on any difference. SOURCE and TARGET are
each a SQLite file or a postgres:// (postgresql://) URL. Back SOURCE up
and stop every instance writing to it first.

`

// runMigrate copies one database into another, empty one and verifies the
// copy. It prints a summary to stdout and every mismatch to stderr.
func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned; help goes where it is asked for
	from := fs.String("from", "", "the database to copy: a SQLite file or a postgres:// URL")
	to := fs.String("to", "", "the empty database to copy into: a SQLite file (made if missing) or a postgres:// URL")
	usage := func(w io.Writer) {
		fmt.Fprint(w, migrateUsage)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return nil
		}
		usage(stderr)
		return fmt.Errorf("migrate: %w", err)
	}
	switch {
	case fs.NArg() > 0:
		usage(stderr)
		return fmt.Errorf("migrate takes no arguments, got %q: give --from and --to", fs.Args())
	case *from == "" || *to == "":
		usage(stderr)
		return errors.New("migrate: give both --from SOURCE and --to TARGET")
	}

	if !serve.IsPostgres(*from) {
		// sqlite.Open would make a new, empty database of a missing file.
		if _, err := os.Stat(*from); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("migrate: source %s does not exist", *from)
		} else if err != nil {
			return fmt.Errorf("migrate: source %s: %w", *from, err)
		}
	}
	src, closeSrc, err := openStore(ctx, *from)
	if err != nil {
		return fmt.Errorf("migrate: open source: %w", err)
	}
	defer closeSrc()
	dst, closeDst, err := openStore(ctx, *to)
	if err != nil {
		return fmt.Errorf("migrate: open target: %w", err)
	}
	defer closeDst()

	srcName, dstName := serve.RedactDSN(*from), serve.RedactDSN(*to)
	counts, err := store.Copy(ctx, src, dst)
	switch {
	case feature.ErrorCode(err) == feature.EConflict:
		return fmt.Errorf("migrate: refusing to copy into %s: %w; nothing was changed. Migrate into a new, empty database", dstName, err)
	case err != nil:
		return fmt.Errorf("migrate %s to %s: %w; nothing was written to %s", srcName, dstName, err, dstName)
	}
	fmt.Fprintf(stdout, "Copied %s to %s (rows per table):\n", srcName, dstName)
	var total int64
	for _, c := range counts {
		fmt.Fprintf(stdout, "  %-20s %d\n", c.Table, c.Rows)
		total += c.Rows
	}
	fmt.Fprintf(stdout, "  %-20s %d\n", "total", total)
	fmt.Fprintf(stdout, "Not copied, by design: %s (see docs/operations.md).\n", strings.Join(slices.Sorted(maps.Keys(store.SkippedTables)), ", "))
	return verify(ctx, src, dst, srcName, dstName, len(counts), stdout, stderr)
}

// verify compares every copied table of src with dst's (store.Compare),
// prints every difference to stderr and fails if there is any.
func verify(ctx context.Context, src, dst *store.DB, srcName, dstName string, tables int, stdout, stderr io.Writer) error {
	mismatches, err := store.Compare(ctx, src, dst)
	if err != nil {
		return fmt.Errorf("migrate: verify: %w", err)
	}
	for _, m := range mismatches {
		fmt.Fprintln(stderr, "mismatch:", m)
	}
	if len(mismatches) > 0 {
		return fmt.Errorf("migrate: %s and %s differ in %d places (listed above): do not switch to %s", srcName, dstName, len(mismatches), dstName)
	}
	fmt.Fprintf(stdout, "Verified: the %d copied tables hold the same rows in both databases, column by column.\n", tables)
	return nil
}

// openStore opens the PostgreSQL database or SQLite file where names and
// returns it with a function that closes it. Its operations have no
// timeout: migrate runs alone, and copies in one transaction.
func openStore(ctx context.Context, where string) (*store.DB, func(), error) {
	s, closeDB, err := serve.OpenStore(ctx, where)
	if err != nil {
		return nil, nil, err
	}
	db, ok := s.(*store.DB)
	if !ok {
		closeDB()
		return nil, nil, fmt.Errorf("%s: a store migrate cannot copy (%T)", serve.RedactDSN(where), s)
	}
	db.SetTimeout(0) // one transaction copies every table
	return db, func() { closeDB() }, nil
}
