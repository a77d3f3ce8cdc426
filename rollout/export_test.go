package rollout

// evaluate returns the bucket c serves user and counts it, as the
// snapshot's Evaluate does.
func (c *compiled) evaluate(user string) Evaluation {
	var e Evaluation
	c.evaluateInto(&e, user)
	return e
}

// NewReport returns the churn report of the change from before to after; a
// zero before (no key) is the feature's creation.
func NewReport(before, after Feature) Report {
	var cb *compiled
	if before.Key != "" {
		cb = compile(before)
	}
	return newReport(cb, compile(after))
}

// CoarseLimits are the limits plans of no mode keep on features that fit
// them.
var CoarseLimits = coarseLimits
