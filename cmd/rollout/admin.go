package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime/debug"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rollout/rollout/cmd/internal/serve"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/store/sqlite"
)

const tokenUsage = `usage: rollout token create --name NAME --role admin|editor|viewer|sdk|client|evaluate [--db PATH]
       rollout token list [--db PATH]
       rollout token revoke --name NAME [--db PATH]

Manages API tokens directly in the database, which must exist; a running
server picks a change up within 2 seconds. 'rollout token SUBCOMMAND -h'
lists a subcommand's flags.
`

// runToken manages API tokens directly in the database; a running server
// picks the change up within its token refresh interval.
func runToken(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, tokenUsage)
		return errors.New("token: give a subcommand: create, list or revoke")
	}
	sub, args := args[0], args[1:]
	if isHelpFlag(sub) || sub == "help" {
		fmt.Fprint(stdout, tokenUsage)
		return nil
	}
	fs := flag.NewFlagSet("token "+sub, flag.ContinueOnError)
	dbPath := dbFlag(fs, getenv)
	var name, role *string
	var synopsis string
	switch sub {
	case "create":
		synopsis = "usage: rollout token create --name NAME --role admin|editor|viewer|sdk|client|evaluate [--db PATH]\n\n" +
			"Creates an API token and prints its secret on stdout, this once; only its hash is stored.\n"
		name = fs.String("name", "", "the token's name, recorded as the actor of every change it makes")
		role = fs.String("role", "", "admin, editor, viewer, sdk (servers using the Go client: evaluation and the sync API), client (browsers: evaluation only) or evaluate (the older app role, as sdk)")
	case "list":
		synopsis = "usage: rollout token list [--db PATH]\n\nLists the API tokens: name, role, creation and revocation.\n"
	case "revoke":
		synopsis = "usage: rollout token revoke --name NAME [--db PATH]\n\nRevokes an API token; its name stays taken.\n"
		name = fs.String("name", "", "the name of the token to revoke")
	default:
		fmt.Fprint(stderr, tokenUsage)
		return fmt.Errorf("token: unknown subcommand %q: use create, list or revoke", sub)
	}
	rest, err := parseFlags(fs, synopsis, args, stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("token %s takes no arguments, got %q", sub, rest)
	}
	if name != nil && *name == "" {
		return fmt.Errorf("token %s: give the token's --name", sub)
	}
	db, closeDB, err := openExisting(ctx, *dbPath)
	if err != nil {
		return err
	}
	defer closeDB()
	tokens, err := auth.NewTokens(ctx, db, nil)
	if err != nil {
		return err
	}

	switch sub {
	case "create":
		tok, secret, err := tokens.Create(ctx, *name, auth.Role(*role), time.Now())
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
	default: // revoke
		if err := tokens.Revoke(ctx, *name, time.Now()); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "Revoked token %q.\n", *name)
		return nil
	}
}

// openExisting opens the database at path (a SQLite file or a postgres://
// URL), refusing to create a SQLite file: only serve creates a database, so
// that a mistyped --db is an error rather than a new, empty database.
func openExisting(ctx context.Context, path string) (serve.Store, func() error, error) {
	if !serve.IsPostgres(path) {
		if err := checkSQLiteFile(path); err != nil {
			return nil, nil, err
		}
	}
	return serve.OpenStore(ctx, path)
}

// checkSQLiteFile refuses a SQLite database file that does not exist.
func checkSQLiteFile(path string) error {
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("database %s does not exist: check --db or ROLLOUT_DB (only 'rollout serve' creates a database)", path)
	case err != nil:
		return fmt.Errorf("database %s: %w", path, err)
	case info.IsDir():
		return fmt.Errorf("database %s is a directory, not a database file", path)
	}
	return nil
}

const backupSynopsis = `usage: rollout backup [--db PATH] TARGET

Writes a consistent copy of the database to the new file TARGET while the
server may be running. Restore by serving the copy.
`

// runBackup writes a consistent copy of the database to a new file while
// the server may be running.
func runBackup(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	dbPath := dbFlag(fs, getenv)
	rest, err := parseFlags(fs, backupSynopsis, args, stdout)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return fmt.Errorf("backup: give one target file, got %q ('rollout backup -h' shows how)", rest)
	}
	if serve.IsPostgres(*dbPath) {
		return errors.New("backup copies a SQLite database; back up PostgreSQL with its own tools (pg_dump)")
	}
	if err := checkSQLiteFile(*dbPath); err != nil {
		return err
	}
	db, err := sqlite.Open(ctx, *dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Backup(ctx, rest[0]); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "Backed up %s to %s.\n", *dbPath, rest[0])
	return nil
}

// runVersion prints the module version, the VCS revision and the Go
// version the binary was built from, as the build recorded them.
func runVersion(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	rest, err := parseFlags(fs, "usage: rollout version\n\nPrints the module version and the VCS revision of this build.\n", args, stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("version takes no arguments, got %q", rest)
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return errors.New("version: this binary carries no build information")
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	fmt.Fprintf(stdout, "rollout %s\n", info.Main.Version)
	fmt.Fprintf(stdout, "module   %s\n", info.Main.Path)
	if rev := settings["vcs.revision"]; rev != "" {
		var notes []string
		if t := settings["vcs.time"]; t != "" {
			notes = append(notes, t)
		}
		if settings["vcs.modified"] == "true" {
			notes = append(notes, "with uncommitted changes")
		}
		fmt.Fprintf(stdout, "revision %s", rev)
		if len(notes) > 0 {
			fmt.Fprintf(stdout, " (%s)", strings.Join(notes, ", "))
		}
		fmt.Fprintln(stdout)
	} else {
		fmt.Fprintln(stdout, "revision unknown (built without VCS information, e.g. by go run or outside a checkout)")
	}
	fmt.Fprintf(stdout, "go       %s\n", info.GoVersion)
	return nil
}
