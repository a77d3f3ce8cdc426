// Package openfeaturesuite is what the two runs of OpenFeature's Gherkin
// evaluation suite share: the in-app provider's conformance test
// (api/clienttest/provider) and the OFREP provider's (api). It is imported
// by tests only.
//
// The suite's files live in api/clienttest/provider/testdata/openfeature
// (see SOURCE.md there). Each test reads the feature files its own way,
// keeps its own list of the scenarios it cannot pass, and adds the steps
// that depend on its provider (a stale provider, a provider's state); the
// rest is here:
//
//   - features.go: the test bed's flags translated to rollout features,
//     each variant a bucket, the default variant with all of the ring (the
//     others at 0 replicas), a disabled flag switched off without a
//     fallback, and each targeting expression a rule.
//   - scenario.go: the state of one scenario, its evaluations through an
//     OpenFeature client, and the steps that do not depend on the provider.
package openfeaturesuite
