package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"slices"

	"github.com/rollout/rollout/cmd/internal/serve"
	"github.com/rollout/rollout/rollout"
)

const migrateUsage = `usage: rollout migrate --from SOURCE --to TARGET

Copies every feature with its whole history, every API token (active and
revoked) and the evaluation counts from SOURCE into TARGET, which must be
empty, then checks that both hold the same. SOURCE and TARGET are each a
SQLite file or a postgres:// (postgresql://) URL. Back SOURCE up and stop
every instance writing to it first.

`

// migrationStore is what migrate reads from and writes to: either store.
type migrationStore interface {
	rollout.Store
	rollout.TokenStore
}

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
	if err := checkEmpty(ctx, dst); err != nil {
		return fmt.Errorf("migrate: refusing to copy into %s: %w; nothing was changed. Migrate into a new, empty database", dstName, err)
	}
	sum, err := migrateStores(ctx, src, dst)
	if err != nil {
		return fmt.Errorf("migrate %s to %s: %w; %s may be partly written: empty it (or delete the file) before you try again", srcName, dstName, err, dstName)
	}
	fmt.Fprintf(stdout, "Copied %s to %s:\n", srcName, dstName)
	fmt.Fprintf(stdout, "  features   %d (%d versions)\n", sum.features, sum.versions)
	fmt.Fprintf(stdout, "  archived   %d features (their versions counted above)\n", sum.archived)
	fmt.Fprintf(stdout, "  tokens     %d (%d revoked)\n", sum.tokens, sum.revoked)
	fmt.Fprintf(stdout, "  exposures  %d evaluations\n", sum.exposures)
	fmt.Fprintf(stdout, "  ramps      %d\n", sum.ramps)

	return verify(ctx, src, dst, srcName, dstName, stdout, stderr)
}

// verify compares src with its copy dst, prints every mismatch to stderr
// and fails if there is any.
func verify(ctx context.Context, src, dst migrationStore, srcName, dstName string, stdout, stderr io.Writer) error {
	mismatches, err := verifyMigration(ctx, src, dst)
	if err != nil {
		return fmt.Errorf("migrate: verify: %w", err)
	}
	for _, m := range mismatches {
		fmt.Fprintln(stderr, "mismatch:", m)
	}
	if len(mismatches) > 0 {
		return fmt.Errorf("migrate: %s and %s differ in %d places (listed above): do not switch to %s", srcName, dstName, len(mismatches), dstName)
	}
	fmt.Fprintln(stdout, "Verified: features, versions per feature, tokens, exposure totals and every current configuration are equal.")
	return nil
}

// openStore opens the PostgreSQL database or SQLite file where names and
// returns it with a function that closes it. Its operations have no
// timeout: migrate runs alone, and reads whole histories at once.
func openStore(ctx context.Context, where string) (migrationStore, func(), error) {
	db, closeDB, err := serve.OpenStore(ctx, where)
	if err != nil {
		return nil, nil, err
	}
	db.SetTimeout(0) // a copy reads whole histories at once
	return db, func() { closeDB() }, nil
}

// checkEmpty returns an error saying what s holds unless it has no feature,
// no token and no commit.
func checkEmpty(ctx context.Context, s migrationStore) error {
	features, err := s.Features(ctx)
	if err != nil {
		return err
	}
	tokens, err := s.Tokens(ctx)
	if err != nil {
		return err
	}
	rev, err := s.Revision(ctx)
	if err != nil {
		return err
	}
	ramps, err := s.Ramps(ctx, "")
	if err != nil {
		return err
	}
	if len(ramps) > 0 {
		return fmt.Errorf("it is not empty (%d ramps)", len(ramps))
	}
	if len(features) > 0 || len(tokens) > 0 || rev > 0 {
		return fmt.Errorf("it is not empty (%d features, %d tokens, %d commits)", len(features), len(tokens), rev)
	}
	return nil
}

// migration counts what migrateStores copied.
type migration struct {
	features, versions int
	archived           int // features, their versions counted in versions
	tokens, revoked    int
	exposures          int64
	ramps              int
}

// copyFeature copies feature f with its history (copyFeature) and its
// exposure counts from src to dst, adding what it copied to sum.
func (sum *migration) copyFeature(ctx context.Context, src, dst migrationStore, f rollout.Feature) error {
	n, err := copyFeature(ctx, src, dst, f)
	if err != nil {
		return err
	}
	sum.versions += n
	counts, err := src.Exposures(ctx, f.Key)
	if err != nil {
		return err
	}
	// Feature IDs are kept, and dst has no counts yet: adding them writes
	// the same rows.
	if err := dst.AddExposures(ctx, counts); err != nil {
		return fmt.Errorf("copy exposures of feature %q: %w", f.Key, err)
	}
	for _, e := range counts {
		sum.exposures = rollout.AddCounts(sum.exposures, e.Count)
	}
	return nil
}

// migrateStores copies every feature with its history and exposure counts,
// every token and every ramp (as it stands: state, steps, revision), from
// src into the empty dst. History is replayed version
// by version through CreateFeature and UpdateFeature, so dst holds the same
// entries; the last write is the feature as src stores it now. It fails if
// src takes a commit meanwhile.
func migrateStores(ctx context.Context, src, dst migrationStore) (migration, error) {
	var sum migration
	rev, err := src.Revision(ctx)
	if err != nil {
		return sum, err
	}
	features, err := src.Features(ctx)
	if err != nil {
		return sum, err
	}
	for _, f := range features {
		if err := sum.copyFeature(ctx, src, dst, f); err != nil {
			return sum, err
		}
		sum.features++
	}
	// Archived features: their history, counts and ramps as the served
	// ones', then archived in dst too (an event of rollout migrate in its
	// audit trail).
	archived, err := src.ArchivedFeatures(ctx)
	if err != nil {
		return sum, err
	}
	for _, f := range archived {
		if err := sum.copyFeature(ctx, src, dst, f); err != nil {
			return sum, err
		}
		sum.archived++
		if err := dst.ArchiveFeature(ctx, f.Key, f.Version, rollout.AuditEvent{
			Actor: "rollout migrate", Kind: rollout.AuditArchive, Summary: "archived, as it was in the database it was copied from",
		}); err != nil {
			return sum, fmt.Errorf("archive feature %q: %w", f.Key, err)
		}
	}
	tokens, err := src.Tokens(ctx)
	if err != nil {
		return sum, err
	}
	if err := copyTokens(ctx, dst, tokens); err != nil {
		return sum, err
	}
	sum.tokens = len(tokens)
	for _, t := range tokens {
		if t.RevokedAt != nil {
			sum.revoked++
		}
	}
	ramps, err := src.Ramps(ctx, "")
	if err != nil {
		return sum, err
	}
	for _, r := range ramps {
		if err := dst.CreateRamp(ctx, r); err != nil {
			return sum, fmt.Errorf("copy ramp %s of feature %q: %w", r.ID, r.Feature, err)
		}
	}
	sum.ramps = len(ramps)
	if err := copyGovernance(ctx, src, dst); err != nil {
		return sum, err
	}
	after, err := src.Revision(ctx)
	if err != nil {
		return sum, err
	}
	if after != rev {
		return sum, fmt.Errorf("the source changed while it was copied (revision %d, now %d): stop every instance writing to it", rev, after)
	}
	return sum, nil
}

// copyFeature writes f's history into dst, oldest first, and returns the
// number of versions written.
func copyFeature(ctx context.Context, src, dst migrationStore, f rollout.Feature) (int, error) {
	vs, err := src.Versions(ctx, f.Key, 0, 0)
	if err != nil {
		return 0, err
	}
	slices.Reverse(vs)
	if len(vs) == 0 || vs[len(vs)-1].Version != f.Version {
		return 0, fmt.Errorf("feature %q is at version %d but its history has %d entries", f.Key, f.Version, len(vs))
	}
	for i, v := range vs {
		next := v.Config
		if i == len(vs)-1 {
			next = f
		}
		if i == 0 {
			err = dst.CreateFeature(ctx, next, v)
		} else {
			err = dst.UpdateFeature(ctx, next, v)
		}
		if err != nil {
			return 0, fmt.Errorf("copy version %d of feature %q: %w", v.Version, f.Key, err)
		}
	}
	return len(vs), nil
}

// copyTokens creates tokens, oldest first, in dst, and revokes the revoked
// ones at their time: each before a later token takes its name, the rest at
// the end.
func copyTokens(ctx context.Context, dst migrationStore, tokens []rollout.Token) error {
	pending := map[string]rollout.Token{} // created in dst, revoked in the source
	revoke := func(t rollout.Token) error {
		if err := dst.RevokeToken(ctx, t.Name, *t.RevokedAt, "rollout migrate"); err != nil {
			return fmt.Errorf("revoke token %q (%s): %w", t.Name, t.ID, err)
		}
		delete(pending, t.Name)
		return nil
	}
	for _, t := range tokens {
		if p, ok := pending[t.Name]; ok {
			if err := revoke(p); err != nil {
				return err
			}
		}
		created := t
		created.RevokedAt = nil
		if err := dst.CreateToken(ctx, created); err != nil {
			return fmt.Errorf("copy token %q (%s): %w", t.Name, t.ID, err)
		}
		if t.RevokedAt != nil {
			pending[t.Name] = t
		}
	}
	for _, name := range slices.Sorted(maps.Keys(pending)) {
		if err := revoke(pending[name]); err != nil {
			return err
		}
	}
	return nil
}

// verifyMigration compares src and dst: the features, the number of
// versions of each, each current configuration, the tokens (by ID: name,
// role, hash, revoked or not) and the exposure total of each feature. It
// returns one line for each difference.
func verifyMigration(ctx context.Context, src, dst migrationStore) ([]string, error) {
	var out []string
	srcFeatures, err := src.Features(ctx)
	if err != nil {
		return nil, err
	}
	dstFeatures, err := dst.Features(ctx)
	if err != nil {
		return nil, err
	}
	if len(srcFeatures) != len(dstFeatures) {
		out = append(out, fmt.Sprintf("features: source has %d, target has %d", len(srcFeatures), len(dstFeatures)))
	}
	diffs, err := compareFeatures(ctx, src, dst, "feature", srcFeatures, dstFeatures)
	if err != nil {
		return nil, err
	}
	out = append(out, diffs...)

	diffs, err = compareArchived(ctx, src, dst)
	if err != nil {
		return nil, err
	}
	out = append(out, diffs...)
	diffs, err = compareTokens(ctx, src, dst)
	if err != nil {
		return nil, err
	}
	out = append(out, diffs...)
	diffs, err = compareRamps(ctx, src, dst)
	if err != nil {
		return nil, err
	}
	out = append(out, diffs...)
	diffs, err = compareGovernance(ctx, src, dst)
	if err != nil {
		return nil, err
	}
	return append(out, diffs...), nil
}

// copyGovernance copies the settings (saved once in dst, by "rollout
// migrate", when src ever saved them) and every change request, open or
// decided, oldest first (each with a request_create event in dst's audit
// trail).
func copyGovernance(ctx context.Context, src, dst migrationStore) error {
	st, err := src.Settings(ctx)
	if err != nil {
		return err
	}
	if st.Version > 0 {
		st.Version = 1
		e := rollout.AuditEvent{Actor: "rollout migrate", Kind: rollout.AuditSettings,
			Summary: rollout.SettingsSummary(rollout.DefaultSettings(), st) + ", as they were in the database copied from"}
		if err := dst.SaveSettings(ctx, st, e); err != nil {
			return fmt.Errorf("copy settings: %w", err)
		}
	}
	rs, err := src.Requests(ctx, rollout.RequestQuery{})
	if err != nil {
		return err
	}
	slices.Reverse(rs)
	for _, r := range rs {
		if err := dst.CreateRequest(ctx, r); err != nil {
			return fmt.Errorf("copy change request %s: %w", r.ID, err)
		}
	}
	return nil
}

// compareGovernance compares the settings (but their version and save)
// and the change requests of src and dst.
func compareGovernance(ctx context.Context, src, dst migrationStore) ([]string, error) {
	var out []string
	a, err := src.Settings(ctx)
	if err != nil {
		return nil, err
	}
	b, err := dst.Settings(ctx)
	if err != nil {
		return nil, err
	}
	if a.MaxChurn != b.MaxChurn || !reflect.DeepEqual(a.RequireApproval, b.RequireApproval) {
		out = append(out, fmt.Sprintf("settings: source %+v, target %+v", a, b))
	}
	ra, err := src.Requests(ctx, rollout.RequestQuery{})
	if err != nil {
		return nil, err
	}
	rb, err := dst.Requests(ctx, rollout.RequestQuery{})
	if err != nil {
		return nil, err
	}
	byID := make(map[string]rollout.Request, len(rb))
	for _, r := range rb {
		byID[r.ID] = r
	}
	for _, r := range ra {
		got, ok := byID[r.ID]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("change request %s: missing from the target", r.ID))
		case got.State != r.State || got.Feature != r.Feature || got.Author != r.Author:
			out = append(out, fmt.Sprintf("change request %s: source %s %s by %s, target %s %s by %s", r.ID, r.State, r.Feature, r.Author, got.State, got.Feature, got.Author))
		}
	}
	if len(ra) != len(rb) {
		out = append(out, fmt.Sprintf("change requests: source has %d, target has %d", len(ra), len(rb)))
	}
	return out, nil
}

// compareArchived compares the archived features of src and dst as
// compareFeature compares served ones.
func compareArchived(ctx context.Context, src, dst migrationStore) ([]string, error) {
	srcA, err := src.ArchivedFeatures(ctx)
	if err != nil {
		return nil, err
	}
	dstA, err := dst.ArchivedFeatures(ctx)
	if err != nil {
		return nil, err
	}
	return compareFeatures(ctx, src, dst, "archived feature", srcA, dstA)
}

// compareFeatures compares the features of src with those of dst by key
// (compareFeature), naming them as what ("feature", "archived feature").
func compareFeatures(ctx context.Context, src, dst migrationStore, what string, srcFs, dstFs []rollout.Feature) ([]string, error) {
	dstByKey := make(map[string]rollout.Feature, len(dstFs))
	for _, f := range dstFs {
		dstByKey[f.Key] = f
	}
	var out []string
	for _, f := range srcFs {
		g, ok := dstByKey[f.Key]
		if !ok {
			out = append(out, fmt.Sprintf("%s %q: missing from the target", what, f.Key))
			continue
		}
		delete(dstByKey, f.Key)
		diffs, err := compareFeature(ctx, src, dst, f, g)
		if err != nil {
			return nil, err
		}
		out = append(out, diffs...)
	}
	for _, key := range slices.Sorted(maps.Keys(dstByKey)) {
		out = append(out, fmt.Sprintf("%s %q: in the target only", what, key))
	}
	return out, nil
}

// compareRamps compares the ramps of src and dst by ID, as their JSON.
func compareRamps(ctx context.Context, src, dst migrationStore) ([]string, error) {
	read := func(s migrationStore) (map[string]string, error) {
		rs, err := s.Ramps(ctx, "")
		if err != nil {
			return nil, err
		}
		out := make(map[string]string, len(rs))
		for _, r := range rs {
			b, err := json.Marshal(r)
			if err != nil {
				return nil, err
			}
			out[r.ID] = string(b)
		}
		return out, nil
	}
	srcRamps, err := read(src)
	if err != nil {
		return nil, err
	}
	dstRamps, err := read(dst)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range slices.Sorted(maps.Keys(srcRamps)) {
		switch got, ok := dstRamps[id]; {
		case !ok:
			out = append(out, fmt.Sprintf("ramp %s: missing from the target", id))
		case got != srcRamps[id]:
			out = append(out, fmt.Sprintf("ramp %s: differs", id))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(dstRamps)) {
		if _, ok := srcRamps[id]; !ok {
			out = append(out, fmt.Sprintf("ramp %s: in the target only", id))
		}
	}
	return out, nil
}

// compareFeature compares the feature f of src with g of dst.
func compareFeature(ctx context.Context, src, dst migrationStore, f, g rollout.Feature) ([]string, error) {
	var out []string
	a, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(g)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(a, b) {
		out = append(out, fmt.Sprintf("feature %q: current configuration differs:\n  source %s\n  target %s", f.Key, a, b))
	}
	var n [2]int
	var total [2]int64
	for i, s := range []migrationStore{src, dst} {
		vs, err := s.Versions(ctx, f.Key, 0, 0)
		if err != nil {
			return nil, err
		}
		n[i] = len(vs)
		counts, err := s.Exposures(ctx, f.Key)
		if err != nil {
			return nil, err
		}
		for _, e := range counts {
			total[i] = rollout.AddCounts(total[i], e.Count)
		}
	}
	if n[0] != n[1] {
		out = append(out, fmt.Sprintf("feature %q: source has %d versions, target has %d", f.Key, n[0], n[1]))
	}
	if total[0] != total[1] {
		out = append(out, fmt.Sprintf("feature %q: source counts %d evaluations, target %d", f.Key, total[0], total[1]))
	}
	return out, nil
}

// compareTokens compares the tokens of src and dst by ID.
func compareTokens(ctx context.Context, src, dst migrationStore) ([]string, error) {
	srcTokens, err := src.Tokens(ctx)
	if err != nil {
		return nil, err
	}
	dstTokens, err := dst.Tokens(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	if len(srcTokens) != len(dstTokens) {
		out = append(out, fmt.Sprintf("tokens: source has %d, target has %d", len(srcTokens), len(dstTokens)))
	}
	type same struct {
		name, role, hash string
		revoked          bool
	}
	key := func(t rollout.Token) same { return same{t.Name, string(t.Role), t.Hash, t.RevokedAt != nil} }
	dstByID := make(map[string]rollout.Token, len(dstTokens))
	for _, t := range dstTokens {
		dstByID[t.ID] = t
	}
	for _, t := range srcTokens {
		u, ok := dstByID[t.ID]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("token %q (%s): missing from the target", t.Name, t.ID))
		case key(t) != key(u):
			out = append(out, fmt.Sprintf("token %q (%s): name, role, secret or revocation differs", t.Name, t.ID))
		}
		delete(dstByID, t.ID)
	}
	for _, id := range slices.Sorted(maps.Keys(dstByID)) {
		out = append(out, fmt.Sprintf("token %q (%s): in the target only", dstByID[id].Name, id))
	}
	return out, nil
}
