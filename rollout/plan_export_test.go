package rollout

// PlanCtxCheckEvery is how many steps a plan takes at most between looks
// at its context.
const PlanCtxCheckEvery = ctxCheckEvery
