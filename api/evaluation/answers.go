package evaluation

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rollout/rollout/rollout/feature"
)

// Every evaluation with the same outcome (feature.Outcome: one feature
// configuration's bucket and reason) has the same answer but for the user
// ID. The API encodes that answer once, the first time the outcome is
// served, and keeps it in the outcome's memo with its counter of
// rollout_evaluations_total, so that the hot path appends a few byte slices
// and increments a counter it holds, rather than encoding strings and
// looking labels up. A change of the feature makes new outcomes, so an
// answer never outlives what it encodes.

// answer is the shared part of the answers of one outcome.
type answer struct {
	e       feature.Evaluation // with no user
	head    []byte             // {"feature":K,"user":
	tail    []byte             // ,"bucket":B,"value":V,"version":N,"reason":R}
	ofrep   []byte             // the whole OFREP answer, which has no user ID
	count   prometheus.Counter
	metrics Metrics // whose count it is
}

// answerOf returns the answer of o, making it at the first call. An
// outcome keeps the answer of one API (one Metrics); another API sharing
// the service gets a new answer at each call.
func answerOf(m Metrics, o *feature.Outcome) *answer {
	if a, ok := o.Memo.Load().(*answer); ok && a.metrics == m {
		return a
	}
	a := newAnswer(m, o.Evaluation(""))
	o.Memo.CompareAndSwap(nil, a)
	return a
}

func newAnswer(m Metrics, e feature.Evaluation) *answer {
	head := appendJSONString(append([]byte(nil), `{"feature":`...), e.Feature)
	head = append(head, `,"user":`...)
	return &answer{
		e:       e,
		head:    head,
		tail:    appendEvaluationTail(nil, e),
		ofrep:   appendOFREPEvaluation(nil, e),
		count:   m.Evaluations(e.Feature, e.Bucket, e.Reason),
		metrics: m,
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
func appendEvaluationTail(b []byte, e feature.Evaluation) []byte {
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
	if e.Rule != "" {
		b = append(b, `,"rule":`...)
		b = appendJSONString(b, e.Rule)
	}
	if e.Prerequisite != "" {
		b = append(b, `,"prerequisite":`...)
		b = appendJSONString(b, e.Prerequisite)
	}
	return append(b, '}')
}
