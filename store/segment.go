package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/idempotency"
)

// Segments returns every segment, ordered by key.
func (db *DB) Segments(ctx context.Context) ([]feature.Segment, error) {
	var out []feature.Segment
	err := db.readTx(ctx, "list segments", func(tx *tx) error {
		rows, err := tx.query(`SELECT key, version, config FROM segments ORDER BY key{C}`)
		out, err = collect(rows, err, scanSegment)
		return err
	})
	return out, err
}

func scanSegment(rows *sql.Rows) (feature.Segment, error) {
	var (
		s       feature.Segment
		key     string
		version int
		config  []byte
	)
	if err := rows.Scan(&key, &version, &config); err != nil {
		return s, err
	}
	if err := json.Unmarshal(config, &s); err != nil {
		return s, fmt.Errorf("decode segment %q: %w", key, err)
	}
	s.Key, s.Version = key, version
	s.CreatedAt, s.UpdatedAt = s.CreatedAt.UTC(), s.UpdatedAt.UTC()
	return s, nil
}

func encodeSegment(s feature.Segment) (string, error) {
	s.CreatedAt, s.UpdatedAt = s.CreatedAt.UTC(), s.UpdatedAt.UTC()
	out, err := encodeJSON(s)
	if err != nil {
		return "", fmt.Errorf("encode segment %q: %w", s.Key, err)
	}
	return out, nil
}

// CreateSegment stores a new segment with its first history entry, and
// settles settle; it returns feature.EConflict when the key is taken.
func (db *DB) CreateSegment(ctx context.Context, s feature.Segment, v feature.SegmentVersion, settle *idempotency.Settlement) error {
	return db.CreateUserList(ctx, s, v, nil, settle)
}

// CreateUserList is CreateSegment for a user list, with its users (each
// once), in the same transaction.
func (db *DB) CreateUserList(ctx context.Context, s feature.Segment, v feature.SegmentVersion, users []string, settle *idempotency.Settlement) error {
	if v.Version != s.Version {
		return fmt.Errorf("create segment %q: history entry is version %d, segment is version %d", s.Key, v.Version, s.Version)
	}
	config, err := encodeSegment(s)
	if err != nil {
		return err
	}
	return db.writeTx(ctx, fmt.Sprintf("create segment %q", s.Key), func(tx *tx) error {
		_, err := tx.exec(`INSERT INTO segments (key, version, config, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
			s.Key, s.Version, config, tx.db.d.Time(s.CreatedAt), tx.db.d.Time(s.UpdatedAt))
		switch tx.constraint(err) {
		case Unique, PrimaryKey:
			return feature.Errorf(feature.EConflict, "segment %q already exists", s.Key)
		}
		if err != nil {
			return err
		}
		if err := tx.editSegmentUsers(s.Key, users, nil); err != nil {
			return err
		}
		if err := tx.insertSegmentVersion(v); err != nil {
			return err
		}
		if err := tx.appendAudit(rollout.SegmentEvent(audit.SegmentCreate, v)); err != nil {
			return err
		}
		if err := tx.addCommit(rollout.CommitSegment, s.Key, db.now()); err != nil {
			return err
		}
		return tx.settle(settle)
	})
}

func (tx *tx) insertSegmentVersion(v feature.SegmentVersion) error {
	config, err := encodeSegment(v.Config)
	if err != nil {
		return err
	}
	_, err = tx.exec(`
		INSERT INTO segment_versions (segment_key, version, actor, created_at, summary, comment, config)
		VALUES (?, ?, ?, ?, ?, ?, ?)`,
		v.Config.Key, v.Version, v.Actor, tx.db.d.Time(v.Time), v.Summary, v.Comment, config)
	if err != nil {
		return fmt.Errorf("insert version %d of segment %q: %w", v.Version, v.Config.Key, err)
	}
	return nil
}

// UpdateSegment replaces the segment, stored at s.Version-1, with s,
// appends v, writes the new version of each feature of features and
// settles settle, all in one transaction.
func (db *DB) UpdateSegment(ctx context.Context, s feature.Segment, v feature.SegmentVersion, features []rollout.Version, settle *idempotency.Settlement) error {
	return db.UpdateUserList(ctx, s, v, nil, nil, features, settle)
}

// UpdateUserList is UpdateSegment for a user list: in the same
// transaction it adds the users of add (none of which it holds) and
// removes those of remove (each of which it holds).
func (db *DB) UpdateUserList(ctx context.Context, s feature.Segment, v feature.SegmentVersion, add, remove []string, features []rollout.Version, settle *idempotency.Settlement) error {
	if v.Version != s.Version {
		return fmt.Errorf("update segment %q: history entry is version %d, segment is version %d", s.Key, v.Version, s.Version)
	}
	config, err := encodeSegment(s)
	if err != nil {
		return err
	}
	return db.writeTx(ctx, fmt.Sprintf("update segment %q", s.Key), func(tx *tx) error {
		n, err := tx.affected(`UPDATE segments SET version = ?, config = ?, updated_at = ? WHERE key = ? AND version = ?`,
			s.Version, config, tx.db.d.Time(s.UpdatedAt), s.Key, s.Version-1)
		if err != nil {
			return err
		}
		if n == 0 {
			return tx.whySegmentNotWritten(s.Key, s.Version-1)
		}
		if err := tx.editSegmentUsers(s.Key, add, remove); err != nil {
			return err
		}
		if err := tx.insertSegmentVersion(v); err != nil {
			return err
		}
		if err := tx.appendAudit(rollout.SegmentEvent(audit.SegmentChange, v)); err != nil {
			return err
		}
		for _, fv := range features {
			if fv.Version != fv.Config.Version {
				return fmt.Errorf("update segment %q: feature %q's history entry is version %d, the feature version %d", s.Key, fv.Config.Key, fv.Version, fv.Config.Version)
			}
			in := tx
			if fv.Environment != "" {
				in = tx.in(fv.Environment)
			}
			if err := in.writeVersion(fv.Config, fv); err != nil {
				return err
			}
		}
		if err := tx.addCommit(rollout.CommitSegment, s.Key, db.now()); err != nil {
			return err
		}
		return tx.settle(settle)
	})
}

func (tx *tx) whySegmentNotWritten(key string, version int) error {
	var stored int
	err := tx.queryRow(`SELECT version FROM segments WHERE key = ?`, key).Scan(&stored)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return feature.Errorf(feature.ENotFound, "segment %q does not exist", key)
	case err != nil:
		return err
	case stored != version:
		return feature.Errorf(feature.EConflict, "segment %q is at version %d, not %d: reload it and try again", key, stored, version)
	}
	return fmt.Errorf("segment %q at version %d exists but was not written", key, version)
}

// DeleteSegment removes the segment at version with its history, records
// e in the audit trail and settles settle. It
// refuses, with feature.EConflict naming them, when stored features' rules
// use the segment.
func (db *DB) DeleteSegment(ctx context.Context, key string, version int, e audit.Event, settle *idempotency.Settlement) error {
	return db.writeTx(ctx, fmt.Sprintf("delete segment %q", key), func(tx *tx) error {
		// Every environment's served features: a segment is shared.
		rows, err := tx.query(`SELECT id, key, version, config FROM features WHERE archived_at IS NULL AND environment IN (SELECT key FROM environments WHERE deleted_at IS NULL) ORDER BY key{C}`)
		features, err := collect(rows, err, scanFeature)
		if err != nil {
			return err
		}
		var users []string
		for _, f := range features {
			if slices.Contains(f.Segments(), key) && !slices.Contains(users, f.Key) {
				users = append(users, f.Key)
			}
		}
		if len(users) > 0 {
			return feature.Errorf(feature.EConflict, "segment %q is in use by feature(s) %s: remove it from their rules first", key, strings.Join(users, ", "))
		}
		if _, err := tx.exec(`DELETE FROM segment_versions WHERE segment_key = ?`, key); err != nil {
			return err
		}
		if _, err := tx.exec(`DELETE FROM segment_users WHERE segment_key = ?`, key); err != nil {
			return err
		}
		n, err := tx.affected(`DELETE FROM segments WHERE key = ? AND version = ?`, key, version)
		if err != nil {
			return err
		}
		if n == 0 {
			return tx.whySegmentNotWritten(key, version)
		}
		if err := tx.appendAudit(e); err != nil {
			return err
		}
		if err := tx.addCommit(rollout.CommitSegment, key, db.now()); err != nil {
			return err
		}
		return tx.settle(settle)
	})
}

// SegmentVersions returns the history of the segment key, newest first:
// at most limit entries (all when limit <= 0) below version before (all
// when before <= 0). It returns feature.ENotFound when there is no such
// segment.
func (db *DB) SegmentVersions(ctx context.Context, key string, before, limit int) ([]feature.SegmentVersion, error) {
	var out []feature.SegmentVersion
	err := db.readTx(ctx, fmt.Sprintf("list versions of segment %q", key), func(tx *tx) error {
		var n int
		if err := tx.queryRow(`SELECT COUNT(*) FROM segments WHERE key = ?`, key).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return feature.Errorf(feature.ENotFound, "segment %q does not exist", key)
		}
		q, args := `SELECT version, actor, created_at, summary, comment, config FROM segment_versions WHERE segment_key = ?`, []any{key}
		if before > 0 {
			q, args = q+` AND version < ?`, append(args, before)
		}
		q += ` ORDER BY version DESC`
		if limit > 0 {
			q, args = q+` LIMIT ?`, append(args, limit)
		}
		rows, err := tx.query(q, args...)
		out, err = collect(rows, err, func(rows *sql.Rows) (feature.SegmentVersion, error) {
			var (
				v      feature.SegmentVersion
				at     timestamp
				config []byte
			)
			if err := rows.Scan(&v.Version, &v.Actor, &at, &v.Summary, &v.Comment, &config); err != nil {
				return v, err
			}
			v.Time = at.T
			if err := json.Unmarshal(config, &v.Config); err != nil {
				return v, fmt.Errorf("decode version %d of segment %q: %w", v.Version, key, err)
			}
			v.Config.CreatedAt, v.Config.UpdatedAt = v.Config.CreatedAt.UTC(), v.Config.UpdatedAt.UTC()
			return v, nil
		})
		return err
	})
	return out, err
}

// editSegmentUsers adds the users of add to the user list key and removes
// those of remove, many rows to a statement, with bound parameters so
// that an ID is kept byte for byte. Adding a user the list holds is
// EConflict: the caller's view of the list was stale.
func (tx *tx) editSegmentUsers(key string, add, remove []string) error {
	for part := range slices.Chunk(remove, chunk) {
		args := []any{key}
		for _, u := range part {
			args = append(args, u)
		}
		if _, err := tx.exec(`DELETE FROM segment_users WHERE segment_key = ? AND user_id IN (?`+strings.Repeat(", ?", len(part)-1)+`)`, args...); err != nil {
			return fmt.Errorf("remove users of list %q: %w", key, err)
		}
	}
	for part := range slices.Chunk(add, chunk) {
		args := make([]any, 0, 2*len(part))
		for _, u := range part {
			args = append(args, key, u)
		}
		_, err := tx.exec(`INSERT INTO segment_users (segment_key, user_id) VALUES `+rows(2, len(part)), args...)
		switch tx.constraint(err) {
		case Unique, PrimaryKey:
			return feature.Errorf(feature.EConflict, "user list %q holds a user it was to be given: reload it and try again", key)
		}
		if err != nil {
			return fmt.Errorf("add users to list %q: %w", key, err)
		}
	}
	return nil
}

// SegmentUsers returns the user IDs of the user list key, sorted (none
// for a segment of conditions); feature.ENotFound when there is no such
// segment.
func (db *DB) SegmentUsers(ctx context.Context, key string) ([]string, error) {
	var out []string
	err := db.readTx(ctx, fmt.Sprintf("list users of segment %q", key), func(tx *tx) error {
		var n int
		if err := tx.queryRow(`SELECT COUNT(*) FROM segments WHERE key = ?`, key).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return feature.Errorf(feature.ENotFound, "segment %q does not exist", key)
		}
		rows, err := tx.query(`SELECT user_id FROM segment_users WHERE segment_key = ? ORDER BY user_id{C}`, key)
		out, err = collect(rows, err, func(rows *sql.Rows) (string, error) {
			var u string
			err := rows.Scan(&u)
			return u, err
		})
		return err
	})
	return out, err
}
