package stream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
)

// GET /api/events is the dashboard's stream of changes: Server-Sent Events
// for people's sessions and read tokens, where GET /sync/v1/stream is for
// apps' sdk tokens and carries whole configurations. Each batch of commits
// the service takes in that touches features is one "change" event naming
// them, with the version and ETag each has now (or that it is gone), so
// that an open page learns that its feature changed elsewhere (another
// tab, a script, a ramp's step) and fetches what it shows. An event holds
// at most maxDashboardEventFeatures features; a batch that changed more
// says only "many", and pages reload. The stream has the budget of every
// stream (budget.go): it is counted in the server's and the token's (a
// session's) share, ends with the session, and drops a client that does
// not read.

// maxDashboardEventFeatures bounds the features one change event lists.
const maxDashboardEventFeatures = 200

// dashboardEvent is the data of a change event.
type dashboardEvent struct {
	Revision int64              `json:"revision"`
	Features []dashboardFeature `json:"features"`
	// Many is set, and Features empty, when the batch changed more
	// features than an event lists.
	Many bool `json:"many,omitempty"`
}

// dashboardFeature is one changed feature: its version and ETag now, or
// Deleted.
type dashboardFeature struct {
	Key     string `json:"key"`
	Version int    `json:"version,omitempty"`
	Tag     string `json:"tag,omitempty"`
	Deleted bool   `json:"deleted,omitempty"`
}

// dashboardEventOf returns the change event of batch as snap serves it, or
// nil when the batch changed no feature.
func dashboardEventOf(batch []rollout.Commit, snap *feature.Snapshot) []byte {
	var keys []string
	var rev int64
	for _, cm := range batch {
		rev = max(rev, cm.Revision)
		if cm.Kind == rollout.CommitFeature {
			keys = append(keys, cm.Key)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	ev := dashboardEvent{Revision: max(rev, snap.Revision()), Features: []dashboardFeature{}}
	if len(keys) > maxDashboardEventFeatures {
		ev.Many = true
	} else {
		for _, key := range keys {
			f, ok := snap.Feature(key)
			if !ok {
				ev.Features = append(ev.Features, dashboardFeature{Key: key, Deleted: true})
				continue
			}
			ev.Features = append(ev.Features, dashboardFeature{Key: key, Version: f.Version, Tag: f.Tag()})
		}
	}
	data, err := json.Marshal(ev)
	if err != nil {
		panic("stream: encode a dashboard event: " + err.Error()) // plain strings and numbers
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "id: %d\nevent: change\ndata: %s\n\n", ev.Revision, data)
	return buf.Bytes()
}

// Dashboard answers GET /api/events, following svc.
func (st *Server) Dashboard(c echo.Context, svc Service) error {
	return st.follow(c, svc, "dashboard stream", func(batch []rollout.Commit) []byte {
		return dashboardEventOf(batch, svc.Snapshot())
	})
}
