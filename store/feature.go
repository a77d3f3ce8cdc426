package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/environment"
	"github.com/rollout/rollout/rollout/feature"
)

// Features returns the current configuration of every feature, ordered by
// key.
func (db *DB) Features(ctx context.Context) ([]feature.Feature, error) {
	var fs []feature.Feature
	err := db.readTx(ctx, "list features", func(tx *tx) (err error) {
		fs, err = tx.listFeatures()
		return err
	})
	return fs, err
}

// Feature returns the current configuration of the feature key. It returns
// feature.ENotFound when there is no such feature.
func (db *DB) Feature(ctx context.Context, key string) (feature.Feature, error) {
	var f feature.Feature
	err := db.readTx(ctx, fmt.Sprintf("read feature %q", key), func(tx *tx) (err error) {
		f, err = tx.findFeature(key)
		return err
	})
	return f, err
}

// CreateFeature stores f and its first history entry v, and settles
// v.Settles. A feature without an ID gets a new UUID. It returns
// feature.EConflict when the key (or the ID) is taken.
func (db *DB) CreateFeature(ctx context.Context, f feature.Feature, v rollout.Version) error {
	if v.Version != f.Version {
		return fmt.Errorf("create feature %q: history entry is version %d, feature is version %d", f.Key, v.Version, f.Version)
	}
	if f.ID == "" {
		f.ID = uuid.NewString()
	}
	return db.writeTx(ctx, fmt.Sprintf("create feature %q", f.Key), func(tx *tx) error {
		if err := tx.insertFeature(f); err != nil {
			return err
		}
		if err := tx.insertVersion(f.ID, f.Key, v); err != nil {
			return err
		}
		if err := tx.addCommit(rollout.CommitFeature, f.Key, db.now()); err != nil {
			return err
		}
		for _, p := range v.Elsewhere {
			if err := tx.in(p.Environment).placeFeature(p.Feature, p.Version); err != nil {
				return err
			}
		}
		return tx.settle(v.Settles)
	})
}

// UpdateFeature replaces the feature of f's key, which must be at version
// f.Version-1 (and have f's ID, when f has one), with f, appends v and
// settles v.Settles. It returns feature.ENotFound when there is no such
// feature and feature.EConflict when the stored feature has moved on.
func (db *DB) UpdateFeature(ctx context.Context, f feature.Feature, v rollout.Version) error {
	if v.Version != f.Version {
		return fmt.Errorf("update feature %q: history entry is version %d, feature is version %d", f.Key, v.Version, f.Version)
	}
	return db.writeTx(ctx, fmt.Sprintf("update feature %q", f.Key), func(tx *tx) error {
		if err := tx.writeVersion(f, v); err != nil {
			return err
		}
		return tx.settle(v.Settles)
	})
}

// writeVersion replaces the stored feature, which must be at version
// f.Version-1, with f, appends v to its history and records the commit.
// What the change does to the feature's definition it writes to the
// feature in every other environment too (shareDefinition).
func (tx *tx) writeVersion(f feature.Feature, v rollout.Version) error {
	others, err := tx.otherEnvironments(f.Key)
	if err != nil {
		return err
	}
	var prev feature.Feature
	if len(others) > 0 {
		if prev, err = tx.findFeature(f.Key); err != nil {
			others = nil // writeOwn says why it cannot be written
		}
	}
	if err := tx.writeOwn(f, v); err != nil {
		return err
	}
	if len(others) == 0 || !environment.DefinitionDiffers(prev, f) {
		return nil
	}
	return tx.shareDefinition(prev, f, v, others)
}

// otherEnvironments lists the environments, other than the transaction's
// and not deleted, that serve the feature key.
func (tx *tx) otherEnvironments(key string) ([]string, error) {
	return tx.otherEnvironmentsWhere(key, "f.archived_at IS NULL")
}

// otherEnvironmentsWhere lists the environments, other than the
// transaction's and not deleted, whose feature key f meets cond.
func (tx *tx) otherEnvironmentsWhere(key, cond string) ([]string, error) {
	rows, err := tx.query(`
		SELECT f.environment FROM features f JOIN environments e ON e.key = f.environment
		WHERE f.key = ? AND f.environment <> ? AND `+cond+` AND e.deleted_at IS NULL
		ORDER BY e.position, e.key{C}`, key, tx.env())
	return collect(rows, err, func(rows *sql.Rows) (env string, err error) {
		err = rows.Scan(&env)
		return env, err
	})
}

// shareDefinition writes the change of definition from prev to next, the
// feature in the transaction's environment (see environment.Redefine), to
// the feature in each of the environments others, as a version of its
// own made by v's actor: it moves no one there.
func (tx *tx) shareDefinition(prev, next feature.Feature, v rollout.Version, others []string) error {
	for _, env := range others {
		in := tx.in(env)
		cur, err := in.findFeature(next.Key)
		if err != nil {
			return err
		}
		f, err := environment.Redefine(prev, next, cur)
		if err != nil {
			return feature.Errorf(feature.ErrorCode(err), "feature %q in environment %s: %s", next.Key, env, feature.ErrorMessage(err))
		}
		if !environment.DefinitionDiffers(cur, f) {
			continue
		}
		f.Version, f.UpdatedAt = cur.Version+1, v.Time
		shares := feature.Compile(cur, nil).Shares()
		pv := rollout.Version{
			Version: f.Version, Actor: v.Actor, Time: v.Time, Comment: v.Comment, Config: f, OverrideCount: len(f.Overrides),
			Summary: "definition changed in " + tx.env() + ": " + v.Summary,
			Report:  feature.Report{FromVersion: cur.Version, ToVersion: f.Version, SharesBefore: shares, SharesAfter: feature.Compile(f, nil).Shares(), Moves: []feature.Move{}},
		}
		if err := in.writeOwn(f, pv); err != nil {
			return err
		}
	}
	return nil
}

// writeOwn is writeVersion in the transaction's environment alone.
func (tx *tx) writeOwn(f feature.Feature, v rollout.Version) error {
	id, err := tx.updateFeature(f)
	if err != nil {
		return err
	}
	if err := tx.insertVersion(id, f.Key, v); err != nil {
		return err
	}
	return tx.addCommit(rollout.CommitFeature, f.Key, tx.db.now())
}

// Versions returns the history of the feature key newest first: at most
// limit entries (all when limit <= 0) below version before (all when
// before <= 0), each with its whole configuration. It returns
// feature.ENotFound when there is no such feature.
func (db *DB) Versions(ctx context.Context, key string, before, limit int) ([]rollout.Version, error) {
	var vs []rollout.Version
	err := db.readTx(ctx, fmt.Sprintf("list versions of feature %q", key), func(tx *tx) (err error) {
		vs, err = tx.readVersions(key, before, limit, "")
		return err
	})
	return vs, err
}

// Version returns one entry of the history of the feature key. It returns
// feature.ENotFound when there is no such feature or version.
func (db *DB) Version(ctx context.Context, key string, version int) (rollout.Version, error) {
	var v rollout.Version
	err := db.readTx(ctx, fmt.Sprintf("read version %d of feature %q", version, key), func(tx *tx) (err error) {
		v, err = tx.findVersion(key, version)
		return err
	})
	return v, err
}

// placeFeature stores f, new in the transaction's environment, at its first
// version v (a rollout.Placed), unless the environment has a feature of
// its key already (archived there, say): that one stays as it is.
func (tx *tx) placeFeature(f feature.Feature, v rollout.Version) error {
	if f.ID == "" {
		f.ID = uuid.NewString()
	}
	var n int
	if err := tx.queryRow(`SELECT COUNT(*) FROM features WHERE environment = ? AND key = ?`, tx.env(), f.Key).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if err := tx.insertFeature(f); err != nil {
		return err
	}
	if err := tx.insertVersion(f.ID, f.Key, v); err != nil {
		return err
	}
	return tx.addCommit(rollout.CommitFeature, f.Key, tx.db.now())
}

func (tx *tx) listFeatures() ([]feature.Feature, error) {
	rows, err := tx.query(`SELECT id, key, version, config FROM features WHERE environment = ? AND archived_at IS NULL ORDER BY key{C}`, tx.env())
	return collect(rows, err, scanFeature)
}

func (tx *tx) findFeature(key string) (feature.Feature, error) {
	rows, err := tx.query(`SELECT id, key, version, config FROM features WHERE environment = ? AND key = ? AND archived_at IS NULL`, tx.env(), key)
	return first(rows, err, scanFeature, feature.Errorf(feature.ENotFound, "feature %q does not exist", key))
}

// scanFeature reads a features row. The id, key and version columns are
// authoritative over the copies in the config; the times are the config's,
// which keep nanoseconds wherever the columns do not.
func scanFeature(rows *sql.Rows) (feature.Feature, error) {
	var (
		f       feature.Feature
		id, key string
		version int
		config  []byte
	)
	if err := rows.Scan(&id, &key, &version, &config); err != nil {
		return feature.Feature{}, err
	}
	if err := json.Unmarshal(config, &f); err != nil {
		return feature.Feature{}, fmt.Errorf("decode feature %q: %w", key, err)
	}
	f.ID, f.Key, f.Version = id, key, version
	f.CreatedAt, f.UpdatedAt = f.CreatedAt.UTC(), f.UpdatedAt.UTC()
	return f, nil
}

func (tx *tx) insertFeature(f feature.Feature) error {
	config, err := encodeFeature(f)
	if err != nil {
		return err
	}
	// An archived feature keeps its key: say so, and how to free it.
	// (Asked first: PostgreSQL reads nothing more in a transaction after
	// a failed insert.)
	var archived bool
	switch err := tx.queryRow(`SELECT archived_at IS NOT NULL FROM features WHERE environment = ? AND key = ?`, tx.env(), f.Key).Scan(&archived); {
	case err == nil && archived:
		return feature.Errorf(feature.EConflict, "feature %q is archived, and its key stays taken until it is purged: restore it (POST /api/features/%s/restore) or, as an admin, purge it (DELETE /api/features/%s?purge=true) first", f.Key, f.Key, f.Key)
	case err != nil && !errors.Is(err, sql.ErrNoRows):
		return err
	}
	_, err = tx.exec(`
		INSERT INTO features (id, environment, key, version, config, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`,
		f.ID, tx.env(), f.Key, f.Version, config, tx.db.d.Time(f.CreatedAt), tx.db.d.Time(f.UpdatedAt))
	switch tx.constraint(err) {
	case Unique:
		return feature.Errorf(feature.EConflict, "feature %q already exists", f.Key)
	case PrimaryKey:
		return feature.Errorf(feature.EConflict, "a feature with ID %q already exists", f.ID)
	}
	return err
}

// updateFeature writes f over the stored feature of its key if that is at
// version f.Version-1, and returns the feature's ID.
func (tx *tx) updateFeature(f feature.Feature) (string, error) {
	config, err := encodeFeature(f)
	if err != nil {
		return "", err
	}
	var id string
	err = tx.queryRow(`
		UPDATE features SET version = ?, config = ?, updated_at = ?
		WHERE environment = ? AND key = ? AND version = ? AND (CAST(? AS TEXT) = '' OR id = ?) AND archived_at IS NULL
		RETURNING id`,
		f.Version, config, tx.db.d.Time(f.UpdatedAt),
		tx.env(), f.Key, f.Version-1, f.ID, f.ID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", tx.whyNotWritten(f.Key, f.ID, f.Version-1)
	}
	return id, err
}

// whyNotWritten explains why no row of the feature key with the given ID
// (any, when "") at the given version was found: the feature does not exist,
// is at another version, or was deleted and created again.
func (tx *tx) whyNotWritten(key, id string, version int) error {
	var storedID string
	var stored int
	var archived bool
	err := tx.queryRow(`SELECT id, version, archived_at IS NOT NULL FROM features WHERE environment = ? AND key = ?`, tx.env(), key).Scan(&storedID, &stored, &archived)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return feature.Errorf(feature.ENotFound, "feature %q does not exist", key)
	case err != nil:
		return err
	case archived:
		return feature.Errorf(feature.ENotFound, "feature %q is archived: restore it first (POST /api/features/%s/restore)", key, key)
	case id != "" && id != storedID:
		return feature.Errorf(feature.EConflict, "feature %q was deleted and created again since it was read; it is now at version %d: reload it and try again", key, stored)
	case stored != version:
		return feature.Errorf(feature.EConflict, "feature %q is at version %d, not %d: reload it and try again", key, stored, version)
	}
	return fmt.Errorf("feature %q at version %d exists but was not written", key, version)
}

// insertVersion appends v, with its churn report, to the history of the
// feature id, whose key is key, and records its audit event
// (rollout.VersionEvent). The version row keeps the configuration without
// its overrides; writeOverrides records what v changed in them.
func (tx *tx) insertVersion(id, key string, v rollout.Version) error {
	config, err := encodeFeature(withoutOverrides(v.Config))
	if err != nil {
		return err
	}
	report, err := encodeJSON(v.Report)
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if _, err := tx.exec(`
		INSERT INTO versions (feature_id, version, actor, created_at, summary, comment, config, override_count)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		id, v.Version, v.Actor, tx.db.d.Time(v.Time), v.Summary, v.Comment, config, len(v.Config.Overrides)); err != nil {
		return fmt.Errorf("insert version %d: %w", v.Version, err)
	}
	if err := tx.writeOverrides(id, v.Version, v.Config.Overrides); err != nil {
		return fmt.Errorf("write overrides of version %d: %w", v.Version, err)
	}
	if _, err := tx.exec(`
		INSERT INTO churn_reports (feature_id, version, churn, modulo_churn, report)
		VALUES (?, ?, ?, ?, ?)`,
		id, v.Version, v.Report.Churn, v.Report.ModuloChurn, report); err != nil {
		return fmt.Errorf("insert report of version %d: %w", v.Version, err)
	}
	if err := tx.appendAudit(rollout.VersionEvent(key, id, v)); err != nil {
		return err
	}
	if v.Request != nil {
		return tx.applyRequest(key, v)
	}
	return nil
}

// withoutOverrides returns f with an empty map of overrides in place of
// its own, nil when it has none: what a version row keeps.
func withoutOverrides(f feature.Feature) feature.Feature {
	if f.Overrides != nil {
		f.Overrides = map[string]string{}
	}
	return f
}

// writeOverrides makes overrides those of the feature id from version on:
// it ends the spans of the overrides that version drops or changes, and
// starts one for each that it adds or changes. Overrides that stay as they
// were cost nothing.
func (tx *tx) writeOverrides(id string, version int, overrides map[string]string) error {
	held := map[string]string{}
	// A feature's first version (its ID is new) has no spans to end.
	if version > 1 {
		rows, err := tx.query(`SELECT user_id, bucket, since, 0 FROM override_spans WHERE feature_id = ? AND until IS NULL`, id)
		spans, err := collect(rows, err, scanSpan)
		if err != nil {
			return err
		}
		for _, s := range spans {
			held[s.user] = s.bucket
		}
	}
	ended, started := overrideDiff(held, overrides)
	// Statements with bound parameters, not JSON, so that a user ID is
	// kept byte for byte whatever it holds; many rows to a statement.
	for part := range slices.Chunk(ended, chunk) {
		args := []any{version, id}
		for _, user := range part {
			args = append(args, user)
		}
		if _, err := tx.exec(`UPDATE override_spans SET until = ? WHERE feature_id = ? AND until IS NULL AND user_id IN (?`+
			strings.Repeat(", ?", len(part)-1)+`)`, args...); err != nil {
			return err
		}
	}
	users := slices.Sorted(maps.Keys(started))
	for part := range slices.Chunk(users, chunk) {
		var args []any
		for _, user := range part {
			args = append(args, id, user, started[user], version)
		}
		if _, err := tx.exec(`INSERT INTO override_spans (feature_id, user_id, bucket, since) VALUES (?, ?, ?, ?)`+
			strings.Repeat(", (?, ?, ?, ?)", len(part)-1), args...); err != nil {
			return err
		}
	}
	return nil
}

// chunk is how many rows one statement writes at most.
const chunk = 500

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

// featureID returns the ID of the feature key, or feature.ENotFound.
func (tx *tx) featureID(key string) (string, error) {
	var id string
	err := tx.queryRow(`SELECT id FROM features WHERE environment = ? AND key = ?`, tx.env(), key).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", feature.Errorf(feature.ENotFound, "feature %q does not exist", key)
	}
	return id, err
}

const selectVersions = `
	SELECT v.version, v.actor, v.created_at, v.summary, v.comment, v.config, v.override_count, r.report
	FROM versions v
	LEFT JOIN churn_reports r ON r.feature_id = v.feature_id AND r.version = v.version
	WHERE v.feature_id = ?`

// selectChanges reads the versions of every feature, with the feature's
// ID and key and the version's Seq.
const selectChanges = `
	SELECT v.version, v.actor, v.created_at, v.summary, v.comment, v.config, v.override_count, r.report, f.id, f.key, v.{seq}
	FROM versions v
	JOIN features f ON f.id = v.feature_id
	LEFT JOIN churn_reports r ON r.feature_id = v.feature_id AND r.version = v.version
	WHERE 1 = 1`

// Changes returns the versions of every existing feature that q selects,
// newest first, without their overrides (see VersionSummaries): the audit
// log. Seq numbers versions in insertion order.
func (db *DB) Changes(ctx context.Context, q rollout.ChangeQuery) ([]rollout.Version, error) {
	var vs []rollout.Version
	err := db.readTx(ctx, "list changes", func(tx *tx) error {
		var b strings.Builder
		b.WriteString(selectChanges)
		b.WriteString(" AND f.environment = ?")
		args := []any{tx.env()}
		if q.Feature != "" {
			b.WriteString(" AND f.key = ?")
			args = append(args, q.Feature)
		}
		if q.Actor != "" {
			b.WriteString(" AND v.actor = ?")
			args = append(args, q.Actor)
		}
		if q.Before > 0 {
			b.WriteString(" AND v.{seq} < ?")
			args = append(args, q.Before)
		}
		b.WriteString(" ORDER BY v.{seq} DESC")
		if q.Limit > 0 {
			b.WriteString(" LIMIT ?")
			args = append(args, q.Limit)
		}
		rows, err := tx.query(b.String(), args...)
		vs, err = collect(rows, err, func(rows *sql.Rows) (rollout.Version, error) {
			var id, key string
			var seq int64
			v, err := scanVersionRow(rows, &id, &key, &seq)
			v.Config.ID, v.Config.Key, v.Seq, v.Config.Overrides = id, key, seq, nil
			return v, err
		})
		return err
	})
	return vs, err
}

// VersionSummaries returns what Versions returns without the overrides:
// each entry's Config.Overrides is nil, its OverrideCount says how many it
// had. It reads no override.
func (db *DB) VersionSummaries(ctx context.Context, key string, before, limit int) ([]rollout.Version, error) {
	var vs []rollout.Version
	err := db.readTx(ctx, fmt.Sprintf("list versions of feature %q", key), func(tx *tx) (err error) {
		_, vs, err = tx.listVersions(key, before, limit)
		for i := range vs {
			vs[i].Config.Overrides = nil
		}
		return err
	})
	return vs, err
}

// UserVersions returns what VersionSummaries returns, with in each entry's
// Config.Overrides the override of user alone (nil when it had none): what
// a look-up of one user's history needs.
func (db *DB) UserVersions(ctx context.Context, key, user string, before, limit int) ([]rollout.Version, error) {
	var vs []rollout.Version
	err := db.readTx(ctx, fmt.Sprintf("list versions of feature %q for a user", key), func(tx *tx) (err error) {
		vs, err = tx.readVersions(key, before, limit, user)
		return err
	})
	return vs, err
}

// listVersions reads a page of the history of the feature key, as stored:
// the configurations' overrides are left empty. It returns the feature's ID.
func (tx *tx) listVersions(key string, before, limit int) (string, []rollout.Version, error) {
	id, err := tx.featureID(key)
	if err != nil {
		return "", nil, err
	}
	var q strings.Builder
	q.WriteString(selectVersions)
	args := []any{id}
	if before > 0 {
		q.WriteString(" AND v.version < ?")
		args = append(args, before)
	}
	q.WriteString(" ORDER BY v.version DESC")
	if limit > 0 {
		q.WriteString(" LIMIT ?")
		args = append(args, limit)
	}
	rows, err := tx.query(q.String(), args...)
	vs, err := collect(rows, err, func(rows *sql.Rows) (rollout.Version, error) {
		v, err := scanVersionRow(rows)
		v.Config.ID, v.Config.Key = id, key
		return v, err
	})
	return id, vs, err
}

// readVersions is listVersions with each version's overrides, those of
// user alone when user is not "" (nil when it had none): the spans that
// overlap the page, each added to the versions it covers.
func (tx *tx) readVersions(key string, before, limit int, user string) ([]rollout.Version, error) {
	id, vs, err := tx.listVersions(key, before, limit)
	if err != nil || len(vs) == 0 {
		return vs, err
	}
	oldest, newest := vs[len(vs)-1].Version, vs[0].Version
	q := `
		SELECT user_id, bucket, since, COALESCE(until, 0) FROM override_spans
		WHERE feature_id = ? AND since <= ? AND (until IS NULL OR until > ?)`
	args := []any{id, newest, oldest}
	if user != "" {
		for i := range vs {
			vs[i].Config.Overrides = nil
		}
		q += " AND user_id = ?"
		args = append(args, user)
	}
	rows, err := tx.query(q, args...)
	spans, err := collect(rows, err, scanSpan)
	if err != nil {
		return nil, err
	}
	add := spanAdder(vs)
	for _, s := range spans {
		add(s.user, s.bucket, s.since, s.until)
	}
	return vs, nil
}

// span is an override held from version since up to until (0: the newest).
type span struct {
	user, bucket string
	since, until int
}

func scanSpan(rows *sql.Rows) (s span, err error) {
	return s, rows.Scan(&s.user, &s.bucket, &s.since, &s.until)
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

func (tx *tx) findVersion(key string, version int) (rollout.Version, error) {
	vs, err := tx.readVersions(key, version+1, 1, "")
	if err != nil {
		return rollout.Version{}, err
	}
	if len(vs) == 0 || vs[0].Version != version {
		return rollout.Version{}, feature.Errorf(feature.ENotFound, "feature %q has no version %d", key, version)
	}
	return vs[0], nil
}

// scanVersionRow reads the columns of selectVersions, then into extra
// those that follow them.
func scanVersionRow(rows *sql.Rows, extra ...any) (rollout.Version, error) {
	var (
		v       rollout.Version
		created timestamp
		config  []byte
		report  []byte
	)
	dest := append([]any{&v.Version, &v.Actor, &created, &v.Summary, &v.Comment, &config, &v.OverrideCount, &report}, extra...)
	if err := rows.Scan(dest...); err != nil {
		return rollout.Version{}, err
	}
	v.Time = created.T
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
func encodeFeature(f feature.Feature) (string, error) {
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

// UpdateFeatureWith reads the feature key and writes the version next makes
// of it, in one write transaction that holds the feature from before the
// read to the commit: SQLite's write lock (write transactions begin
// IMMEDIATE), PostgreSQL's row lock (SELECT … FOR UPDATE). A write of the
// feature by any other process waits for it, and none comes between. The
// read (findFeature, as Feature reads) sees the last commit. It returns
// feature.ENotFound when there is no such feature, and next's error as is.
// It settles the Settles of the version next makes.
func (db *DB) UpdateFeatureWith(ctx context.Context, key string, next func(cur feature.Feature) (feature.Feature, rollout.Version, error)) error {
	return db.writeTx(ctx, fmt.Sprintf("update feature %q", key), func(tx *tx) error {
		if db.d.ForUpdate != "" {
			if _, err := tx.exec(`SELECT 1 FROM features WHERE environment = ? AND key = ? {forUpdate}`, tx.env(), key); err != nil {
				return err
			}
		}
		cur, err := tx.findFeature(key)
		if err != nil {
			return err
		}
		f, v, err := next(cur)
		if err != nil {
			return err
		}
		if v.Version != f.Version {
			return fmt.Errorf("history entry is version %d, feature is version %d", v.Version, f.Version)
		}
		if err := tx.writeVersion(f, v); err != nil {
			return err
		}
		return tx.settle(v.Settles)
	})
}
