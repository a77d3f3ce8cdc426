package api

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	segjson "github.com/segmentio/encoding/json"

	"github.com/rollout/rollout/rollout"
)

// Within one snapshot, every evaluation of a feature that serves the same
// bucket for the same reason has the same answer but for the user ID. The
// API encodes that answer once per snapshot, the first time it is served,
// and keeps it with its counter of rollout_evaluations_total, so that the
// hot path appends a few byte slices and increments a counter it holds,
// rather than encoding strings and looking labels up.

// answer is the shared part of the answers of one feature, bucket and
// reason in one snapshot.
type answer struct {
	e     rollout.Evaluation // with no user
	head  []byte             // {"feature":K,"user":
	tail  []byte             // ,"bucket":B,"value":V,"version":N,"reason":R}
	ofrep []byte             // the whole OFREP answer, which has no user ID
	count prometheus.Counter
}

// answers holds a snapshot's answers: feature key → *featureAnswers. It
// holds at most one answer per feature, bucket and reason of the snapshot
// (only evaluations that succeeded make one), and goes with its
// snapshotState.
type answers struct{ m sync.Map }

// featureAnswers are the answers of one feature made so far, replaced
// whole when one is added: a feature has few buckets.
type featureAnswers struct{ list atomic.Pointer[[]*answer] }

// answerOf returns the answer of e, which st.snap evaluated, making it at
// the first call.
func (st *snapshotState) answerOf(m *Metrics, e rollout.Evaluation) *answer {
	v, ok := st.answers.m.Load(e.Feature)
	if !ok {
		v, _ = st.answers.m.LoadOrStore(e.Feature, new(featureAnswers))
	}
	fa := v.(*featureAnswers)
	for {
		old := fa.list.Load()
		var list []*answer
		if old != nil {
			list = *old
		}
		for _, a := range list {
			if a.e.Bucket == e.Bucket && a.e.Reason == e.Reason {
				return a
			}
		}
		a := newAnswer(m, e)
		next := append(slices.Clip(list), a)
		if fa.list.CompareAndSwap(old, &next) {
			return a
		}
	}
}

func newAnswer(m *Metrics, e rollout.Evaluation) *answer {
	head := appendJSONString(append([]byte(nil), `{"feature":`...), e.Feature)
	head = append(head, `,"user":`...)
	e.User = ""
	return &answer{
		e:     e,
		head:  head,
		tail:  appendEvaluationTail(nil, e),
		ofrep: appendOFREPEvaluation(nil, e),
		count: m.evalChildren.get(evalLabels{e.Feature, e.Bucket, e.Reason}),
	}
}

// appendTo appends the JSON of the evaluation for the user whose JSON
// string is user: byte for byte what appendEvaluation writes.
func (a *answer) appendTo(b, user []byte) []byte {
	b = append(b, a.head...)
	b = append(b, user...)
	return append(b, a.tail...)
}

// appendFor is appendTo for the user ID itself, encoded on the way.
func (a *answer) appendFor(b []byte, user string) []byte {
	b = appendJSONString(append(b, a.head...), user)
	return append(b, a.tail...)
}

// appendEvaluationTail appends what follows the user ID in the JSON of e.
func appendEvaluationTail(b []byte, e rollout.Evaluation) []byte {
	if e.Bucket == "" {
		b = append(b, `,"bucket":null,"value":null`...)
	} else {
		b = append(b, `,"bucket":`...)
		b = appendJSONString(b, e.Bucket)
		b = append(b, `,"value":`...)
		b = appendRawJSON(b, e.Value)
	}
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, int64(e.Version), 10)
	b = append(b, `,"reason":`...)
	b = appendJSONString(b, e.Reason)
	return append(b, '}')
}

// validJSON reports whether b is one JSON value, as json.Valid does, at a
// few times its speed: the evaluation paths check every request body before
// reading it by hand. It never accepts what json.Valid refuses (see
// FuzzValidJSON); what it refuses goes to the general path, which decodes
// with encoding/json and words the error.
func validJSON(b []byte) bool { return segjson.Valid(b) }
