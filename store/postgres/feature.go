package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rollout/rollout/rollout"
)

// Features returns the current configuration of every feature, ordered by
// key.
func (db *DB) Features(ctx context.Context) ([]rollout.Feature, error) {
	var fs []rollout.Feature
	err := db.readTx(ctx, "list features", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id, key, version, config FROM features ORDER BY key COLLATE "C"`)
		if err != nil {
			return err
		}
		fs, err = pgx.CollectRows(rows, scanFeature)
		return err
	})
	if fs == nil && err == nil {
		fs = []rollout.Feature{}
	}
	return fs, err
}

// Feature returns the current configuration of the feature key. It returns
// rollout.ENotFound when there is no such feature.
func (db *DB) Feature(ctx context.Context, key string) (rollout.Feature, error) {
	var f rollout.Feature
	err := db.readTx(ctx, fmt.Sprintf("read feature %q", key), func(tx pgx.Tx) (err error) {
		f, err = findFeature(ctx, tx, key)
		return err
	})
	return f, err
}

// findFeature reads the feature key in tx, or returns rollout.ENotFound.
func findFeature(ctx context.Context, tx pgx.Tx, key string) (rollout.Feature, error) {
	rows, err := tx.Query(ctx, `SELECT id, key, version, config FROM features WHERE key = $1`, key)
	if err != nil {
		return rollout.Feature{}, err
	}
	f, err := pgx.CollectExactlyOneRow(rows, scanFeature)
	if errors.Is(err, pgx.ErrNoRows) {
		return rollout.Feature{}, rollout.Errorf(rollout.ENotFound, "feature %q does not exist", key)
	}
	return f, err
}

// scanFeature reads a features row. The id, key and version columns are
// authoritative over the copies in the config; the times are the config's,
// which keep nanoseconds.
func scanFeature(row pgx.CollectableRow) (rollout.Feature, error) {
	var (
		f       rollout.Feature
		id, key string
		version int
		config  []byte
	)
	if err := row.Scan(&id, &key, &version, &config); err != nil {
		return rollout.Feature{}, err
	}
	if err := json.Unmarshal(config, &f); err != nil {
		return rollout.Feature{}, fmt.Errorf("decode feature %q: %w", key, err)
	}
	f.ID, f.Key, f.Version = id, key, version
	f.CreatedAt, f.UpdatedAt = f.CreatedAt.UTC(), f.UpdatedAt.UTC()
	return f, nil
}

// CreateFeature stores f and its first history entry v. A feature without
// an ID gets a new UUID. It returns rollout.EConflict when the key (or the
// ID) is taken.
func (db *DB) CreateFeature(ctx context.Context, f rollout.Feature, v rollout.Version) error {
	if v.Version != f.Version {
		return fmt.Errorf("create feature %q: history entry is version %d, feature is version %d", f.Key, v.Version, f.Version)
	}
	if f.ID == "" {
		f.ID = uuid.NewString()
	}
	config, err := encodeFeature(f)
	if err != nil {
		return fmt.Errorf("create feature %q: %w", f.Key, err)
	}
	return db.writeTx(ctx, fmt.Sprintf("create feature %q", f.Key), func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			INSERT INTO features (id, key, version, config, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6)`,
			f.ID, f.Key, f.Version, config, f.CreatedAt.UTC(), f.UpdatedAt.UTC())
		if code, constraint := sqlState(err); code == uniqueViolation {
			if constraint == "features_pkey" {
				return rollout.Errorf(rollout.EConflict, "a feature with ID %q already exists", f.ID)
			}
			return rollout.Errorf(rollout.EConflict, "feature %q already exists", f.Key)
		}
		if err != nil {
			return err
		}
		if err := insertVersion(ctx, tx, f.ID, v); err != nil {
			return err
		}
		return addCommit(ctx, tx, rollout.CommitFeature, f.Key, db.now())
	})
}

// UpdateFeature replaces the feature of f's key, which must be at version
// f.Version-1 (and have f's ID, when f has one), with f and appends v. It
// returns rollout.ENotFound when there is no such feature and
// rollout.EConflict when the stored feature has moved on.
func (db *DB) UpdateFeature(ctx context.Context, f rollout.Feature, v rollout.Version) error {
	if v.Version != f.Version {
		return fmt.Errorf("update feature %q: history entry is version %d, feature is version %d", f.Key, v.Version, f.Version)
	}
	config, err := encodeFeature(f)
	if err != nil {
		return fmt.Errorf("update feature %q: %w", f.Key, err)
	}
	return db.writeTx(ctx, fmt.Sprintf("update feature %q", f.Key), func(tx pgx.Tx) error {
		return db.updateFeature(ctx, tx, f, config, v)
	})
}

// updateFeature writes f (config encoded) over the stored feature of its
// key if that is at version f.Version-1, appends v and the commit.
func (db *DB) updateFeature(ctx context.Context, tx pgx.Tx, f rollout.Feature, config string, v rollout.Version) error {
	var id string
	err := tx.QueryRow(ctx, `
		UPDATE features SET version = $1, config = $2, updated_at = $3
		WHERE key = $4 AND version = $5 AND ($6 = '' OR id = $6)
		RETURNING id`,
		f.Version, config, f.UpdatedAt.UTC(), f.Key, f.Version-1, f.ID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return whyNotWritten(ctx, tx, f.Key, f.ID, f.Version-1)
	}
	if err != nil {
		return err
	}
	if err := insertVersion(ctx, tx, id, v); err != nil {
		return err
	}
	return addCommit(ctx, tx, rollout.CommitFeature, f.Key, db.now())
}

// DeleteFeature removes the feature key, which must be at the given
// version, with its history and exposures. It returns rollout.ENotFound
// when there is no such feature and rollout.EConflict when it is at another
// version.
func (db *DB) DeleteFeature(ctx context.Context, key string, version int) error {
	return db.writeTx(ctx, fmt.Sprintf("delete feature %q", key), func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM features WHERE key = $1 AND version = $2`, key, version)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return whyNotWritten(ctx, tx, key, "", version)
		}
		return addCommit(ctx, tx, rollout.CommitFeature, key, db.now())
	})
}

// whyNotWritten explains why no row of the feature key with the given ID
// (any, when "") at the given version was found: the feature does not exist,
// is at another version, or was deleted and created again.
func whyNotWritten(ctx context.Context, tx pgx.Tx, key, id string, version int) error {
	var storedID string
	var stored int
	err := tx.QueryRow(ctx, `SELECT id, version FROM features WHERE key = $1`, key).Scan(&storedID, &stored)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return rollout.Errorf(rollout.ENotFound, "feature %q does not exist", key)
	case err != nil:
		return err
	case id != "" && id != storedID:
		return rollout.Errorf(rollout.EConflict, "feature %q was deleted and created again since it was read; it is now at version %d: reload it and try again", key, stored)
	case stored != version:
		return rollout.Errorf(rollout.EConflict, "feature %q is at version %d, not %d: reload it and try again", key, stored, version)
	}
	return fmt.Errorf("feature %q at version %d exists but was not written", key, version)
}

// insertVersion appends v, with its churn report, to the history of the
// feature id. The version row keeps the configuration without its
// overrides; writeOverrides records what v changed in them.
func insertVersion(ctx context.Context, tx pgx.Tx, id string, v rollout.Version) error {
	config, err := encodeFeature(withoutOverrides(v.Config))
	if err != nil {
		return err
	}
	report, err := encodeJSON(v.Report)
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO versions (feature_id, version, actor, created_at, summary, comment, config, override_count)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		id, v.Version, v.Actor, v.Time.UTC(), v.Summary, v.Comment, config, len(v.Config.Overrides)); err != nil {
		return fmt.Errorf("insert version %d: %w", v.Version, err)
	}
	if err := writeOverrides(ctx, tx, id, v.Version, v.Config.Overrides); err != nil {
		return fmt.Errorf("write overrides of version %d: %w", v.Version, err)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO churn_reports (feature_id, version, churn, modulo_churn, report)
		VALUES ($1, $2, $3, $4, $5)`,
		id, v.Version, v.Report.Churn, v.Report.ModuloChurn, report); err != nil {
		return fmt.Errorf("insert report of version %d: %w", v.Version, err)
	}
	return nil
}

// withoutOverrides returns f with an empty map of overrides in place of
// its own, nil when it has none: what a version row keeps.
func withoutOverrides(f rollout.Feature) rollout.Feature {
	if f.Overrides != nil {
		f.Overrides = map[string]string{}
	}
	return f
}

// writeOverrides makes overrides those of the feature id from version on:
// it ends the spans of the overrides that version drops or changes, and
// starts one for each that it adds or changes. Overrides that stay as they
// were cost nothing.
func writeOverrides(ctx context.Context, tx pgx.Tx, id string, version int, overrides map[string]string) error {
	rows, err := tx.Query(ctx, `SELECT user_id, bucket FROM override_spans WHERE feature_id = $1 AND until IS NULL`, id)
	if err != nil {
		return err
	}
	held := map[string]string{}
	var user, bucket string
	if _, err := pgx.ForEachRow(rows, []any{&user, &bucket}, func() error {
		held[user] = bucket
		return nil
	}); err != nil {
		return err
	}
	ended, started := overrideDiff(held, overrides)
	if len(ended) > 0 {
		if _, err := tx.Exec(ctx, `
			UPDATE override_spans SET until = $1
			WHERE feature_id = $2 AND until IS NULL AND user_id = ANY($3)`,
			version, id, ended); err != nil {
			return err
		}
	}
	if len(started) > 0 {
		users := make([]string, 0, len(started))
		buckets := make([]string, 0, len(started))
		for u, b := range started {
			users, buckets = append(users, u), append(buckets, b)
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO override_spans (feature_id, user_id, bucket, since)
			SELECT $1, u, b, $2 FROM unnest($3::text[], $4::text[]) AS o (u, b)`,
			id, version, users, buckets); err != nil {
			return err
		}
	}
	return nil
}

// overrideDiff returns the users whose override in held ends in next
// (dropped or changed) and the overrides of next that start (added or
// changed).
func overrideDiff(held, next map[string]string) (ended []string, started map[string]string) {
	for user, bucket := range held {
		if b, ok := next[user]; !ok || b != bucket {
			ended = append(ended, user)
		}
	}
	started = map[string]string{}
	for user, bucket := range next {
		if b, ok := held[user]; !ok || b != bucket {
			started[user] = bucket
		}
	}
	return ended, started
}

// featureID returns the ID of the feature key, or rollout.ENotFound.
func featureID(ctx context.Context, tx pgx.Tx, key string) (string, error) {
	var id string
	err := tx.QueryRow(ctx, `SELECT id FROM features WHERE key = $1`, key).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", rollout.Errorf(rollout.ENotFound, "feature %q does not exist", key)
	}
	return id, err
}

const selectVersions = `
	SELECT v.version, v.actor, v.created_at, v.summary, v.comment, v.config, v.override_count, r.report
	FROM versions v
	LEFT JOIN churn_reports r ON r.feature_id = v.feature_id AND r.version = v.version
	WHERE v.feature_id = $1`

// selectChanges reads the versions of every feature, with the feature's
// ID and key and the version's seq.
const selectChanges = `
	SELECT v.version, v.actor, v.created_at, v.summary, v.comment, v.config, v.override_count, r.report, f.id, f.key, v.seq
	FROM versions v
	JOIN features f ON f.id = v.feature_id
	LEFT JOIN churn_reports r ON r.feature_id = v.feature_id AND r.version = v.version
	WHERE true`

// Changes returns the versions of every existing feature that q selects,
// newest first by seq, which a sequence numbers in insertion order,
// without their overrides (see VersionSummaries): the audit log.
func (db *DB) Changes(ctx context.Context, q rollout.ChangeQuery) ([]rollout.Version, error) {
	var vs []rollout.Version
	err := db.readTx(ctx, "list changes", func(tx pgx.Tx) error {
		var b strings.Builder
		b.WriteString(selectChanges)
		var args []any
		if q.Feature != "" {
			args = append(args, q.Feature)
			fmt.Fprintf(&b, " AND f.key = $%d", len(args))
		}
		if q.Actor != "" {
			args = append(args, q.Actor)
			fmt.Fprintf(&b, " AND v.actor = $%d", len(args))
		}
		if q.Before > 0 {
			args = append(args, q.Before)
			fmt.Fprintf(&b, " AND v.seq < $%d", len(args))
		}
		b.WriteString(" ORDER BY v.seq DESC")
		if q.Limit > 0 {
			args = append(args, q.Limit)
			fmt.Fprintf(&b, " LIMIT $%d", len(args))
		}
		rows, err := tx.Query(ctx, b.String(), args...)
		if err != nil {
			return err
		}
		vs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (rollout.Version, error) {
			var (
				id, key string
				seq     int64
			)
			v, err := scanVersionRow(row, &id, &key, &seq)
			if err != nil {
				return v, err
			}
			v.Config.ID, v.Config.Key, v.Seq = id, key, seq
			v.Config.Overrides = nil
			return v, nil
		})
		return err
	})
	if vs == nil && err == nil {
		vs = []rollout.Version{}
	}
	return vs, err
}

// Versions returns the history of the feature key newest first: at most
// limit entries (all when limit <= 0) below version before (all when
// before <= 0), each with its whole configuration. It returns
// rollout.ENotFound when there is no such feature.
func (db *DB) Versions(ctx context.Context, key string, before, limit int) ([]rollout.Version, error) {
	var vs []rollout.Version
	err := db.readTx(ctx, fmt.Sprintf("list versions of feature %q", key), func(tx pgx.Tx) (err error) {
		vs, err = readVersions(ctx, tx, key, before, limit, "")
		return err
	})
	return vs, err
}

// VersionSummaries returns what Versions returns without the overrides:
// each entry's Config.Overrides is nil, its OverrideCount says how many it
// had. It reads no override.
func (db *DB) VersionSummaries(ctx context.Context, key string, before, limit int) ([]rollout.Version, error) {
	var vs []rollout.Version
	err := db.readTx(ctx, fmt.Sprintf("list versions of feature %q", key), func(tx pgx.Tx) (err error) {
		_, vs, err = listVersions(ctx, tx, key, before, limit)
		for i := range vs {
			vs[i].Config.Overrides = nil
		}
		return err
	})
	return vs, err
}

// Version returns one entry of the history of the feature key, with its
// whole configuration. It returns rollout.ENotFound when there is no such
// feature or version.
func (db *DB) Version(ctx context.Context, key string, version int) (rollout.Version, error) {
	var v rollout.Version
	err := db.readTx(ctx, fmt.Sprintf("read version %d of feature %q", version, key), func(tx pgx.Tx) error {
		vs, err := readVersions(ctx, tx, key, version+1, 1, "")
		if err != nil {
			return err
		}
		if len(vs) == 0 || vs[0].Version != version {
			return rollout.Errorf(rollout.ENotFound, "feature %q has no version %d", key, version)
		}
		v = vs[0]
		return nil
	})
	return v, err
}

// UserVersions returns what VersionSummaries returns, with in each entry's
// Config.Overrides the override of user alone (nil when it had none): what
// a look-up of one user's history needs.
func (db *DB) UserVersions(ctx context.Context, key, user string, before, limit int) ([]rollout.Version, error) {
	var vs []rollout.Version
	err := db.readTx(ctx, fmt.Sprintf("list versions of feature %q for a user", key), func(tx pgx.Tx) (err error) {
		vs, err = readVersions(ctx, tx, key, before, limit, user)
		return err
	})
	return vs, err
}

// listVersions reads a page of the history of the feature key, as stored:
// the configurations' overrides are left empty. It returns the feature's ID.
func listVersions(ctx context.Context, tx pgx.Tx, key string, before, limit int) (string, []rollout.Version, error) {
	id, err := featureID(ctx, tx, key)
	if err != nil {
		return "", nil, err
	}
	var q strings.Builder
	q.WriteString(selectVersions)
	args := []any{id}
	if before > 0 {
		args = append(args, before)
		fmt.Fprintf(&q, " AND v.version < $%d", len(args))
	}
	q.WriteString(" ORDER BY v.version DESC")
	if limit > 0 {
		args = append(args, limit)
		fmt.Fprintf(&q, " LIMIT $%d", len(args))
	}
	rows, err := tx.Query(ctx, q.String(), args...)
	if err != nil {
		return "", nil, err
	}
	vs, err := pgx.CollectRows(rows, versionScanner(id, key))
	if vs == nil {
		vs = []rollout.Version{}
	}
	return id, vs, err
}

// readVersions is listVersions with each version's overrides, those of
// user alone when user is not "" (nil when it had none): the spans that
// overlap the page, each added to the versions it covers.
func readVersions(ctx context.Context, tx pgx.Tx, key string, before, limit int, user string) ([]rollout.Version, error) {
	id, vs, err := listVersions(ctx, tx, key, before, limit)
	if err != nil || len(vs) == 0 {
		return vs, err
	}
	oldest, newest := vs[len(vs)-1].Version, vs[0].Version
	q := `
		SELECT user_id, bucket, since, COALESCE(until, 0) FROM override_spans
		WHERE feature_id = $1 AND since <= $2 AND (until IS NULL OR until > $3)`
	args := []any{id, newest, oldest}
	if user != "" {
		for i := range vs {
			vs[i].Config.Overrides = nil
		}
		q += " AND user_id = $4"
		args = append(args, user)
	}
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	add := spanAdder(vs)
	var (
		u, bucket    string
		since, until int
	)
	_, err = pgx.ForEachRow(rows, []any{&u, &bucket, &since, &until}, func() error {
		add(u, bucket, since, until)
		return nil
	})
	return vs, err
}

// spanAdder returns a function that adds an override, held from version
// since up to until (0: the newest), to each of vs (newest first) it
// covers, making the map of a version whose Overrides is nil.
func spanAdder(vs []rollout.Version) func(user, bucket string, since, until int) {
	return func(user, bucket string, since, until int) {
		// vs is newest first: the first version below until, then down to since.
		i, _ := slices.BinarySearchFunc(vs, until, func(v rollout.Version, until int) int {
			if until == 0 || v.Version < until {
				return 1
			}
			return -1
		})
		for ; i < len(vs) && vs[i].Version >= since; i++ {
			if vs[i].Config.Overrides == nil {
				vs[i].Config.Overrides = map[string]string{}
			}
			vs[i].Config.Overrides[user] = bucket
		}
	}
}

// versionScanner reads rows of selectVersions of the feature id, key. A
// version without a report has a zero Report.
func versionScanner(id, key string) pgx.RowToFunc[rollout.Version] {
	return func(row pgx.CollectableRow) (rollout.Version, error) {
		v, err := scanVersionRow(row)
		if err != nil {
			return rollout.Version{}, err
		}
		v.Config.ID, v.Config.Key = id, key
		return v, nil
	}
}

// scanVersionRow reads the columns of selectVersions, then into extra
// those that follow them.
func scanVersionRow(row pgx.CollectableRow, extra ...any) (rollout.Version, error) {
	var (
		v       rollout.Version
		created time.Time
		config  []byte
		report  []byte
	)
	dest := append([]any{&v.Version, &v.Actor, &created, &v.Summary, &v.Comment, &config, &v.OverrideCount, &report}, extra...)
	if err := row.Scan(dest...); err != nil {
		return rollout.Version{}, err
	}
	v.Time = created.UTC()
	if err := json.Unmarshal(config, &v.Config); err != nil {
		return rollout.Version{}, fmt.Errorf("decode configuration of version %d: %w", v.Version, err)
	}
	v.Config.CreatedAt, v.Config.UpdatedAt = v.Config.CreatedAt.UTC(), v.Config.UpdatedAt.UTC()
	if report != nil {
		if err := json.Unmarshal(report, &v.Report); err != nil {
			return rollout.Version{}, fmt.Errorf("decode report of version %d: %w", v.Version, err)
		}
	}
	return v, nil
}

// encodeFeature returns f as JSON with its times in UTC.
func encodeFeature(f rollout.Feature) (string, error) {
	f.CreatedAt, f.UpdatedAt = f.CreatedAt.UTC(), f.UpdatedAt.UTC()
	s, err := encodeJSON(f)
	if err != nil {
		return "", fmt.Errorf("encode feature %q: %w", f.Key, err)
	}
	return s, nil
}

// encodeJSON returns v as compact JSON. It does not escape <, > and &, so
// bucket values are stored as given (compacted).
func encodeJSON(v any) (string, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}
