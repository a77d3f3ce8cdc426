package rollout

// evaluate returns the bucket c serves user and counts it, as the
// snapshot's Evaluate does.
func (c *compiled) evaluate(user string) Evaluation {
	var e Evaluation
	c.evaluateInto(&e, user)
	return e
}
