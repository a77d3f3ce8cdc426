package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/experiment"
	"github.com/rollout/rollout/rollout/feature"
)

// Experiments' tables (metrics, tracked_events, track_batches,
// experiments, experiment_users) keep times as Unix milliseconds in both
// dialects.

func millis(t time.Time) int64 { return t.UnixMilli() }

// appendAuditIf records ev in the audit trail unless it has no kind.
func (tx *tx) appendAuditIf(ev audit.Event) error {
	if ev.Kind == "" {
		return nil
	}
	return tx.appendAudit(ev)
}

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// CreateMetric stores a new metric, and ev (see experiment.ExperimentStore).
func (db *DB) CreateMetric(ctx context.Context, m experiment.Metric, ev audit.Event) error {
	return db.writeTx(ctx, fmt.Sprintf("create metric %q", m.Key), func(tx *tx) error {
		var n int
		if err := tx.queryRow(`SELECT COUNT(*) FROM metrics`).Scan(&n); err != nil {
			return err
		}
		if n >= experiment.MaxMetrics {
			return feature.Errorf(feature.EInvalid, "there are %d metrics already, the most a server keeps: delete one first", n)
		}
		_, err := tx.exec(`INSERT INTO metrics (key, kind, description, higher_is_better, created_at, created_by) VALUES (?, ?, ?, ?, ?, ?)`,
			m.Key, string(m.Kind), m.Description, m.HigherIsBetter, millis(m.CreatedAt), m.CreatedBy)
		if c := tx.constraint(err); c == PrimaryKey || c == Unique {
			return feature.Errorf(feature.EConflict, "metric %q exists", m.Key)
		}
		if err != nil {
			return err
		}
		return tx.appendAuditIf(ev)
	})
}

const metricColumns = `key, kind, description, higher_is_better, created_at, created_by`

func scanMetric(rows *sql.Rows) (experiment.Metric, error) {
	var m experiment.Metric
	var kind string
	var at int64
	err := rows.Scan(&m.Key, &kind, &m.Description, &m.HigherIsBetter, &at, &m.CreatedBy)
	m.Kind, m.CreatedAt = experiment.MetricKind(kind), fromMillis(at)
	return m, err
}

// Metrics returns every metric by key.
func (db *DB) Metrics(ctx context.Context) ([]experiment.Metric, error) {
	var out []experiment.Metric
	err := db.read(ctx, "list metrics", func(tx *tx) error {
		rows, err := tx.query(`SELECT ` + metricColumns + ` FROM metrics ORDER BY key{C}`)
		out, err = collect(rows, err, scanMetric)
		return err
	})
	return out, err
}

// Metric returns one metric.
func (db *DB) Metric(ctx context.Context, key string) (experiment.Metric, error) {
	var m experiment.Metric
	err := db.read(ctx, fmt.Sprintf("metric %q", key), func(tx *tx) error {
		rows, err := tx.query(`SELECT `+metricColumns+` FROM metrics WHERE key = ?`, key)
		m, err = first(rows, err, scanMetric, feature.Errorf(feature.ENotFound, "no metric %q", key))
		return err
	})
	return m, err
}

// DeleteMetric deletes a metric and its events, unless a running
// experiment reads it.
func (db *DB) DeleteMetric(ctx context.Context, key string, ev audit.Event) error {
	return db.writeTx(ctx, fmt.Sprintf("delete metric %q", key), func(tx *tx) error {
		rows, err := tx.query(`SELECT id, metrics FROM experiments WHERE stopped_at IS NULL`)
		running, err := collect(rows, err, func(rows *sql.Rows) ([2]string, error) {
			var r [2]string
			return r, rows.Scan(&r[0], &r[1])
		})
		if err != nil {
			return err
		}
		for _, r := range running {
			var keys []string
			if err := json.Unmarshal([]byte(r[1]), &keys); err != nil {
				return fmt.Errorf("metrics of experiment %s: %w", r[0], err)
			}
			if slices.Contains(keys, key) {
				return feature.Errorf(feature.EConflict, "metric %q is read by running experiment %s: stop it first", key, r[0])
			}
		}
		if _, err := tx.exec(`DELETE FROM tracked_events WHERE metric = ?`, key); err != nil {
			return err
		}
		n, err := tx.affected(`DELETE FROM metrics WHERE key = ?`, key)
		if err == nil && n == 0 {
			err = feature.Errorf(feature.ENotFound, "no metric %q", key)
		}
		if err != nil {
			return err
		}
		return tx.appendAuditIf(ev)
	})
}

// AddTrackBatch stores events, in the DB's environment, once per batch
// ID; IDs received rollout.ExposureBatchMemory before at are removed.
// Events of metrics deleted meanwhile are dropped.
func (db *DB) AddTrackBatch(ctx context.Context, batch string, at time.Time, events []experiment.TrackedEvent) (bool, error) {
	var added bool
	err := db.writeTx(ctx, fmt.Sprintf("add track batch %q", batch), func(tx *tx) error {
		added = false
		if _, err := tx.exec(`DELETE FROM track_batches WHERE received_at < ?`, millis(at.Add(-rollout.ExposureBatchMemory))); err != nil {
			return err
		}
		n, err := tx.affected(`INSERT INTO track_batches (id, received_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING`, batch, millis(at))
		if err != nil || n == 0 {
			return err
		}
		added = true
		for part := range slices.Chunk(events, chunk) {
			args := make([]any, 0, 1+4*len(part))
			args = append(args, tx.env()) // the SELECT's, first
			for _, e := range part {
				args = append(args, e.Metric, e.UserHash, millis(e.At), e.Value)
			}
			const row = "(CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS DOUBLE PRECISION))"
			if _, err := tx.exec(`
				INSERT INTO tracked_events (metric, user_hash, at, value, environment)
				SELECT v.column1, v.column2, v.column3, v.column4, CAST(? AS TEXT)
				FROM (VALUES `+row+strings.Repeat(", "+row, len(part)-1)+`) AS v
				WHERE EXISTS (SELECT 1 FROM metrics m WHERE m.key = v.column1)`, args...); err != nil {
				return err
			}
		}
		return nil
	})
	return added && err == nil, err
}

// StartExperiment stores a running experiment.
func (db *DB) StartExperiment(ctx context.Context, x experiment.Experiment, ev audit.Event) error {
	metrics, err := json.Marshal(x.Metrics)
	if err != nil {
		return err
	}
	shares, err := json.Marshal(x.Shares)
	if err != nil {
		return err
	}
	return db.writeTx(ctx, fmt.Sprintf("start experiment on %q", x.Feature), func(tx *tx) error {
		_, err := tx.exec(`INSERT INTO experiments (id, feature_id, name, control, metrics, hypothesis, version, shares, started_at, started_by)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			x.ID, x.FeatureID, x.Name, x.Control, string(metrics), x.Hypothesis, x.Version, string(shares), millis(x.StartedAt), x.StartedBy)
		switch tx.constraint(err) {
		case Unique:
			return feature.Errorf(feature.EConflict, "an experiment runs on feature %q already: stop it first", x.Feature)
		case ForeignKey:
			return feature.NotFound(x.Feature)
		}
		if err != nil {
			return err
		}
		return tx.appendAuditIf(ev)
	})
}

const experimentColumns = `x.id, f.key, x.feature_id, x.name, x.control, x.metrics, x.hypothesis, x.version, x.shares, x.started_at, x.started_by, x.stopped_at, x.stopped_by, x.dropped_exposures`

func scanExperiment(rows *sql.Rows) (experiment.Experiment, error) {
	var x experiment.Experiment
	var metrics, shares string
	var started int64
	var stopped sql.NullInt64
	if err := rows.Scan(&x.ID, &x.Feature, &x.FeatureID, &x.Name, &x.Control, &metrics, &x.Hypothesis, &x.Version, &shares, &started, &x.StartedBy, &stopped, &x.StoppedBy, &x.DroppedExposures); err != nil {
		return x, err
	}
	if err := json.Unmarshal([]byte(metrics), &x.Metrics); err != nil {
		return x, fmt.Errorf("metrics of experiment %s: %w", x.ID, err)
	}
	if err := json.Unmarshal([]byte(shares), &x.Shares); err != nil {
		return x, fmt.Errorf("shares of experiment %s: %w", x.ID, err)
	}
	x.StartedAt, x.Status = fromMillis(started), "running"
	if stopped.Valid {
		t := fromMillis(stopped.Int64)
		x.StoppedAt, x.Status = &t, "stopped"
	}
	return x, nil
}

// StopExperiment stops a running experiment.
func (db *DB) StopExperiment(ctx context.Context, featureID, id string, at time.Time, actor string, ev audit.Event) (experiment.Experiment, error) {
	var x experiment.Experiment
	err := db.writeTx(ctx, fmt.Sprintf("stop experiment %s", id), func(tx *tx) error {
		n, err := tx.affected(`UPDATE experiments SET stopped_at = ?, stopped_by = ? WHERE id = ? AND feature_id = ? AND stopped_at IS NULL`,
			millis(at), actor, id, featureID)
		if err != nil {
			return err
		}
		x, err = tx.experiment(featureID, id)
		if err == nil && n == 0 {
			err = feature.Errorf(feature.EConflict, "experiment %s stopped already", id)
		}
		if err != nil {
			return err
		}
		return tx.appendAuditIf(ev)
	})
	return x, err
}

func (tx *tx) experiment(featureID, id string) (experiment.Experiment, error) {
	rows, err := tx.query(`SELECT `+experimentColumns+` FROM experiments x JOIN features f ON f.id = x.feature_id WHERE x.id = ? AND x.feature_id = ?`, id, featureID)
	return first(rows, err, scanExperiment, feature.Errorf(feature.ENotFound, "no experiment %q on this feature", feature.Abbreviate(id)))
}

// Experiments returns the experiments of a feature row, newest first.
func (db *DB) Experiments(ctx context.Context, featureID string) ([]experiment.Experiment, error) {
	var out []experiment.Experiment
	err := db.read(ctx, "list experiments", func(tx *tx) error {
		rows, err := tx.query(`SELECT `+experimentColumns+` FROM experiments x JOIN features f ON f.id = x.feature_id
			WHERE x.feature_id = ? ORDER BY x.started_at DESC, x.id`, featureID)
		out, err = collect(rows, err, scanExperiment)
		return err
	})
	return out, err
}

// Experiment returns one experiment of a feature row.
func (db *DB) Experiment(ctx context.Context, featureID, id string) (experiment.Experiment, error) {
	var x experiment.Experiment
	err := db.read(ctx, fmt.Sprintf("experiment %s", id), func(tx *tx) error {
		var err error
		x, err = tx.experiment(featureID, id)
		return err
	})
	return x, err
}

// RunningExperiments returns the running experiments of the DB's
// environment's features.
func (db *DB) RunningExperiments(ctx context.Context) ([]experiment.Experiment, error) {
	var out []experiment.Experiment
	err := db.read(ctx, "running experiments", func(tx *tx) error {
		rows, err := tx.query(`SELECT `+experimentColumns+` FROM experiments x JOIN features f ON f.id = x.feature_id
			WHERE x.stopped_at IS NULL AND f.environment = ? ORDER BY x.id`, tx.env())
		out, err = collect(rows, err, scanExperiment)
		return err
	})
	return out, err
}

// AddFirstExposures records first exposures, in the order of their
// experiment and user (so that concurrent writers cannot deadlock): a
// user recorded already keeps the first, and is marked multiple when the
// bucket differs.
func (db *DB) AddFirstExposures(ctx context.Context, xs []experiment.FirstExposure) error {
	if len(xs) == 0 {
		return nil
	}
	xs = slices.Clone(xs)
	slices.SortStableFunc(xs, func(a, b experiment.FirstExposure) int {
		return cmp.Or(strings.Compare(a.Experiment, b.Experiment), cmp.Compare(a.UserHash, b.UserHash))
	})
	return db.writeTx(ctx, "add first exposures", func(tx *tx) error {
		for part := range slices.Chunk(xs, chunk) {
			// One statement must not touch a row twice: the second
			// exposure of a user in part goes in a statement of its own.
			var rest []experiment.FirstExposure
			args := make([]any, 0, 5*len(part))
			rows := 0
			for i, x := range part {
				if i > 0 && x.Experiment == part[i-1].Experiment && x.UserHash == part[i-1].UserHash {
					rest = append(rest, x)
					continue
				}
				args = append(args, x.Experiment, x.UserHash, x.Bucket, x.Version, millis(x.At))
				rows++
			}
			if err := tx.addFirstExposures(args, rows); err != nil {
				return err
			}
			for _, x := range rest {
				if err := tx.addFirstExposures([]any{x.Experiment, x.UserHash, x.Bucket, x.Version, millis(x.At)}, 1); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func (tx *tx) addFirstExposures(args []any, rows int) error {
	const row = "(CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS BIGINT))"
	_, err := tx.exec(`
		INSERT INTO experiment_users (experiment_id, user_hash, bucket, version, at)
		SELECT v.column1, v.column2, v.column3, v.column4, v.column5
		FROM (VALUES `+row+strings.Repeat(", "+row, rows-1)+`) AS v
		WHERE EXISTS (SELECT 1 FROM experiments x WHERE x.id = v.column1)
		ON CONFLICT (experiment_id, user_hash) DO UPDATE SET multiple = TRUE
		WHERE experiment_users.bucket <> excluded.bucket`, args...)
	return err
}

// ExperimentUsers returns an experiment's users per bucket (multiple
// exposures left out) and its multiple exposures.
func (db *DB) ExperimentUsers(ctx context.Context, id string) (map[string]int64, int64, error) {
	users := map[string]int64{}
	var multiple int64
	err := db.resultsTx(ctx, fmt.Sprintf("users of experiment %s", id), func(tx *tx) error {
		rows, err := tx.query(`SELECT bucket, SUM(CASE WHEN multiple THEN 0 ELSE 1 END), SUM(CASE WHEN multiple THEN 1 ELSE 0 END)
			FROM experiment_users WHERE experiment_id = ? GROUP BY bucket`, id)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var b string
			var n, m int64
			if err := rows.Scan(&b, &n, &m); err != nil {
				return err
			}
			if n > 0 {
				users[b] = n
			}
			multiple += m
		}
		return rows.Err()
	})
	return users, multiple, err
}

// resultsAllowance is how much longer than the DB's timeout the reads of
// an experiment's figures may take: they read every user of it, up to
// millions.
const resultsAllowance = 25 * time.Second

// resultsTx is readTx with resultsAllowance more time.
func (db *DB) resultsTx(ctx context.Context, op string, fn func(*tx) error) error {
	if db.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, db.timeout+resultsAllowance)
		defer cancel()
	}
	return db.inTx(ctx, db.d.Read, db.d.ReadTx, op, fn)
}

// ExperimentTotals returns, per bucket, an experiment's users (multiple
// exposures left out), those with an event of metric, tracked in the
// environment of the experiment's feature row, from their first
// exposure to until, and the sum and sum of squares of their per-user
// sums of values. It reads the metric's events since the experiment
// started, each joined to its user by the primary key, and counts the
// users per bucket apart: its work grows with the events, and with the
// users only for that count.
func (db *DB) ExperimentTotals(ctx context.Context, id, metric string, until time.Time) ([]experiment.BucketTotals, error) {
	var out []experiment.BucketTotals
	err := db.resultsTx(ctx, fmt.Sprintf("totals of experiment %s", id), func(tx *tx) error {
		var (
			started int64
			env     string
		)
		if err := tx.queryRow(`SELECT x.started_at, f.environment FROM experiments x JOIN features f ON f.id = x.feature_id
			WHERE x.id = ?`, id).Scan(&started, &env); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return feature.Errorf(feature.ENotFound, "no experiment %q", feature.Abbreviate(id))
			}
			return err
		}
		rows, err := tx.query(`SELECT bucket, COUNT(*) FROM experiment_users
			WHERE experiment_id = ? AND NOT multiple GROUP BY bucket ORDER BY bucket{C}`, id)
		out, err = collect(rows, err, func(rows *sql.Rows) (experiment.BucketTotals, error) {
			var t experiment.BucketTotals
			return t, rows.Scan(&t.Bucket, &t.Users)
		})
		if err != nil {
			return err
		}
		rows, err = tx.query(`
			SELECT x.bucket, COUNT(*), SUM(t.v), SUM(t.v * t.v)
			FROM (
				SELECT e.user_hash, SUM(e.value) AS v
				FROM tracked_events e
				JOIN experiment_users u ON u.experiment_id = ? AND u.user_hash = e.user_hash AND e.at >= u.at
				WHERE e.environment = ? AND e.metric = ? AND e.at >= ? AND e.at <= ? AND NOT u.multiple
				GROUP BY e.user_hash
			) t
			JOIN experiment_users x ON x.experiment_id = ? AND x.user_hash = t.user_hash
			GROUP BY x.bucket`, id, env, metric, started, millis(until), id)
		sums, err := collect(rows, err, func(rows *sql.Rows) (experiment.BucketTotals, error) {
			var t experiment.BucketTotals
			return t, rows.Scan(&t.Bucket, &t.Converts, &t.Sum, &t.SumSq)
		})
		if err != nil {
			return err
		}
		for _, sum := range sums {
			for i := range out {
				if out[i].Bucket == sum.Bucket {
					out[i].Converts, out[i].Sum, out[i].SumSq = sum.Converts, sum.Sum, sum.SumSq
				}
			}
		}
		return nil
	})
	return out, err
}

// AddDroppedExposures adds to the experiments' dropped first exposures, in
// the order of their IDs.
func (db *DB) AddDroppedExposures(ctx context.Context, dropped map[string]int64) error {
	ids := slices.Sorted(maps.Keys(dropped))
	return db.writeTx(ctx, "add dropped exposures", func(tx *tx) error {
		for _, id := range ids {
			if _, err := tx.exec(`UPDATE experiments SET dropped_exposures = dropped_exposures + ? WHERE id = ?`, dropped[id], id); err != nil {
				return err
			}
		}
		return nil
	})
}

// PurgeTrackedEvents deletes at most limit of the environment's tracked
// events from before before, oldest first.
func (db *DB) PurgeTrackedEvents(ctx context.Context, before time.Time, limit int) (int64, error) {
	var n int64
	err := db.writeTx(ctx, "purge tracked events", func(tx *tx) error {
		var err error
		n, err = tx.affected(`DELETE FROM tracked_events WHERE seq IN (
			SELECT seq FROM tracked_events WHERE environment = ? AND at < ? ORDER BY at LIMIT ?)`, tx.env(), millis(before), limit)
		return err
	})
	return n, err
}

// SaveResultsSnapshot keeps results as the snapshot of at's UTC day.
func (db *DB) SaveResultsSnapshot(ctx context.Context, id string, at time.Time, results []byte) error {
	day := at.UTC().Truncate(24 * time.Hour)
	return db.writeTx(ctx, fmt.Sprintf("snapshot of experiment %s", id), func(tx *tx) error {
		_, err := tx.exec(`INSERT INTO experiment_snapshots (experiment_id, day, taken_at, results)
			SELECT CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS TEXT) WHERE EXISTS (SELECT 1 FROM experiments WHERE id = ?)
			ON CONFLICT (experiment_id, day) DO UPDATE SET taken_at = excluded.taken_at, results = excluded.results`,
			id, millis(day), millis(at), string(results), id)
		return err
	})
}

// ResultsSnapshots returns the last limit snapshots of an experiment,
// oldest first.
func (db *DB) ResultsSnapshots(ctx context.Context, id string, limit int) ([]experiment.ResultsSnapshot, error) {
	var out []experiment.ResultsSnapshot
	err := db.read(ctx, fmt.Sprintf("snapshots of experiment %s", id), func(tx *tx) error {
		rows, err := tx.query(`SELECT results FROM experiment_snapshots WHERE experiment_id = ? ORDER BY day DESC LIMIT ?`, id, limit)
		out, err = collect(rows, err, func(rows *sql.Rows) (experiment.ResultsSnapshot, error) {
			var s experiment.ResultsSnapshot
			var data string
			if err := rows.Scan(&data); err != nil {
				return s, err
			}
			if err := json.Unmarshal([]byte(data), &s); err != nil {
				return s, fmt.Errorf("snapshot of experiment %s: %w", id, err)
			}
			return s, nil
		})
		return err
	})
	slices.Reverse(out)
	return out, err
}
