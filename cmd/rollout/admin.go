package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/store"
)

const tokenUsage = `usage: rollout token create --name NAME --role admin|editor|viewer|evaluate [--db PATH]
       rollout token list [--db PATH]
       rollout token revoke --name NAME [--db PATH]
`

// runToken manages API tokens directly in the database; a running server
// picks the change up within its token refresh interval.
func runToken(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, tokenUsage)
		return fmt.Errorf("token: give a subcommand: create, list or revoke")
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("token "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbPath := fs.String("db", envOr(getenv, "ROLLOUT_DB", "rollout.db"), "SQLite database file (env ROLLOUT_DB)")
	name := fs.String("name", "", "the token's name, recorded as the actor of every change it makes")
	role := fs.String("role", "", "admin, editor, viewer or evaluate")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("token %s takes no arguments, got %q", sub, fs.Args())
	}
	db, err := store.Open(ctx, *dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	tokens, err := rollout.NewTokens(ctx, db)
	if err != nil {
		return err
	}

	switch sub {
	case "create":
		tok, secret, err := tokens.Create(ctx, *name, rollout.Role(*role), time.Now())
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "Created %s token %q. Its secret is shown this once; store it now:\n", tok.Role, tok.Name)
		fmt.Fprintln(stdout, secret)
		return nil
	case "list":
		all, err := tokens.List(ctx)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NAME\tROLE\tCREATED\tREVOKED")
		for _, t := range all {
			revoked := "-"
			if t.RevokedAt != nil {
				revoked = t.RevokedAt.Format(time.RFC3339)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", t.Name, t.Role, t.CreatedAt.Format(time.RFC3339), revoked)
		}
		return w.Flush()
	case "revoke":
		if err := tokens.Revoke(ctx, *name, time.Now()); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "Revoked token %q.\n", *name)
		return nil
	}
	fmt.Fprint(stderr, tokenUsage)
	return fmt.Errorf("token: unknown subcommand %q", sub)
}

// runBackup writes a consistent copy of the database to a new file while
// the server may be running.
func runBackup(ctx context.Context, args []string, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbPath := fs.String("db", envOr(getenv, "ROLLOUT_DB", "rollout.db"), "SQLite database file (env ROLLOUT_DB)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rollout backup [--db PATH] TARGET")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("backup: give one target file")
	}
	db, err := store.Open(ctx, *dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Backup(ctx, fs.Arg(0)); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "Backed up %s to %s.\n", *dbPath, fs.Arg(0))
	return nil
}
