// Package experiment runs experiments on the features of a
// rollout.Service: it records the first exposure of each user a feature
// serves while an experiment runs on it (through the snapshots' served
// hook and in-app clients' batches), takes the events apps track, and
// compares buckets by an always-valid test (package rollout/stats).
//
// # A map of the package
//
// Metrics, events and experiments (experiment.go). A Metric is what an
// experiment measures; Experiments.Track takes the TrackedEvents apps
// send; Experiments.Start and Stop run one Experiment per feature row and
// environment, and a recorder per running experiment keeps each user's
// first exposure (FirstExposure), flushed to the ExperimentStore. There
// is one Experiments per environment's Service (EnvironmentExperiments).
//
// Results (results.go). Experiments.Results compares each bucket with
// the control on each metric: rates or means, the lift and its
// always-valid interval (ResultsMethod), cached for a short while.
//
// History and retention (history.go). Each running experiment keeps one
// snapshot of its results a day (ResultsSnapshot), the lift over time of
// the results' history; the hourly job (Daily) takes them and deletes
// tracked events older than the retention (DefaultEventRetention).
package experiment
