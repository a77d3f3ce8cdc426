package api

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

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
	head  []byte // {"feature":K,"user":
	tail  []byte // ,"bucket":B,"value":V,"version":N,"reason":R}
	ofrep []byte // the whole OFREP answer, which has no user ID
	count prometheus.Counter
}

type answerKey struct{ feature, bucket, reason string }

// answers holds a snapshot's answers, by answerKey. It holds at most one
// per feature, bucket and reason of the snapshot (a key is stored only for
// an evaluation that succeeded), and goes with its snapshotState.
type answers struct{ m sync.Map }

// of returns the answer of e, which st.snap evaluated, building it at the
// first call.
func (st *snapshotState) answerOf(m *Metrics, e rollout.Evaluation) *answer {
	k := answerKey{e.Feature, e.Bucket, e.Reason}
	if a, ok := st.answers.m.Load(k); ok {
		return a.(*answer)
	}
	a, _ := st.answers.m.LoadOrStore(k, newAnswer(m, e))
	return a.(*answer)
}

func newAnswer(m *Metrics, e rollout.Evaluation) *answer {
	head := appendJSONString(append([]byte(nil), `{"feature":`...), e.Feature)
	head = append(head, `,"user":`...)
	return &answer{
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
