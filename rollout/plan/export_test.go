package plan

// CtxCheckEvery is how many steps a plan takes at most between looks at its
// context.
const CtxCheckEvery = ctxCheckEvery

// FeatureLimits are a feature's limits (feature.MaxReplicas and
// feature.MaxPoints), which the tests plan within.
var FeatureLimits = Limits{MaxReplicas: 1000, MaxPoints: 10_000}

// FineLimits are a feature's limits for fine plans.
var FineLimits = Limits{MaxReplicas: 20_000, MaxPoints: 20_000}

// CoarseLimits are the limits plans of no mode keep on features that fit
// them.
var CoarseLimits = coarseLimits
