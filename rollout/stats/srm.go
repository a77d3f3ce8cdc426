// Package stats is the statistics of rollout's exposure reports and
// experiments: the sample-ratio check (CheckSRM) of the users counted per
// bucket against the exact shares served, by Pearson's χ² and its p-value
// (ChiSquareSF), and the always-valid comparison
// of an experiment's buckets (Sequential, MeanInterval). It is pure: it knows counts and shares, not features,
// and imports neither HTTP nor SQL. Package rollout checks each version's
// counts with it (package rollout/exposure's Report).
//
// The files: srm.go (the sample-ratio check), sequential.go (the
// always-valid comparison of an experiment's buckets: Sequential,
// MeanInterval).
package stats

import (
	"fmt"
	"math"
	"slices"

	"github.com/rollout/rollout/rollout/feature"
)

// SRMThreshold is the p-value under which a sample-ratio check warns: the
// counts per bucket are then too far from the shares served to be chance.
const SRMThreshold = 0.001

// SRMMinExpected is how many users (or exposures) each bucket must expect
// before a sample-ratio check can warn: a tutorial's few evaluations never
// raise the alarm.
const SRMMinExpected = 100

// SRM is a sample-ratio-mismatch check: Pearson's χ² of the exposures
// counted per bucket at one version against the exact shares of the users
// that version served each bucket, and its p-value. It counts evaluations:
// it assumes each is an independent user's, as exposures logged once per
// user (or session) are; counting the same users' repeated evaluations
// inflates χ².
type SRM struct {
	Version int `json:"version"`
	// Total is the count tested: the counts of the buckets with a share
	// above 0. Counts of buckets the version served no share (overrides,
	// or no bucket) are Unexpected, left out of the test.
	Total      int64   `json:"total"`
	Unexpected int64   `json:"unexpected,omitempty"`
	ChiSquare  float64 `json:"chi_square"`
	DF         int     `json:"df"`
	PValue     float64 `json:"p_value"`
	// Mismatch reports PValue < SRMThreshold, once every bucket expects
	// at least SRMMinExpected (Waiting until then); Warning says so in
	// words.
	Mismatch bool `json:"mismatch"`
	Waiting  bool `json:"waiting,omitempty"`
	// Estimated: the counts are distinct users estimated by sketches,
	// whose error the test allows for (CheckSRMEstimated).
	Estimated bool   `json:"estimated,omitempty"`
	Warning   string `json:"warning,omitempty"`
}

// CheckSRM returns the sample-ratio check of counts (bucket name → count)
// against shares (bucket name → exact share of users), or false when there
// is nothing to test: fewer than two buckets with a share above 0, or no
// count among them.
func CheckSRM(version int, counts map[string]int64, shares map[string]float64) (SRM, bool) {
	return CheckSRMEstimated(version, counts, shares, 0)
}

// CheckSRMEstimated is CheckSRM of counts that are estimates, each off by
// a relative standard error relErr independently (distinct users counted
// by sketches): each bucket's term of χ² is divided by the variance of
// both the sampling and the estimate, want·(1 + relErr²·want), so that
// an estimate's error alone never raises the alarm, however many users.
func CheckSRMEstimated(version int, counts map[string]int64, shares map[string]float64, relErr float64) (SRM, bool) {
	r := SRM{Version: version, Estimated: relErr > 0}
	var names []string
	for name, s := range shares {
		if s > 0 {
			names = append(names, name)
			r.Total = feature.AddCounts(r.Total, counts[name])
		}
	}
	for name, n := range counts {
		if shares[name] <= 0 {
			r.Unexpected = feature.AddCounts(r.Unexpected, n)
		}
	}
	if len(names) < 2 || r.Total == 0 {
		return SRM{}, false
	}
	slices.Sort(names)
	var sumShares float64
	for _, name := range names {
		sumShares += shares[name]
	}
	total := float64(r.Total)
	for _, name := range names {
		want := total * shares[name] / sumShares
		if want < SRMMinExpected {
			r.Waiting = true
		}
		d := float64(counts[name]) - want
		r.ChiSquare += d * d / (want * (1 + relErr*relErr*want))
	}
	r.DF = len(names) - 1
	r.PValue = ChiSquareSF(r.ChiSquare, r.DF)
	if r.PValue < SRMThreshold && !r.Waiting {
		r.Mismatch = true
		r.Warning = fmt.Sprintf("sample-ratio mismatch at version %d: χ² = %.1f, p = %.2g < %g; the exposures counted per bucket do not match the shares served: check how exposures are logged before reading the experiment", version, r.ChiSquare, r.PValue, SRMThreshold)
	}
	return r, true
}

// ChiSquareSF is the survival function of the χ² distribution with df
// degrees of freedom: the probability of a value of at least x, Q(df/2,
// x/2), the regularized upper incomplete gamma function.
func ChiSquareSF(x float64, df int) float64 {
	switch {
	case math.IsNaN(x) || df < 1:
		return math.NaN()
	case x <= 0:
		return 1
	case math.IsInf(x, 1):
		return 0
	}
	return gammaQ(float64(df)/2, x/2)
}

// gammaQ is the regularized upper incomplete gamma function Q(a, x), for
// a > 0 and x > 0: by its series when x < a+1 (as 1 − P), else by its
// continued fraction (modified Lentz), each to float64 precision.
func gammaQ(a, x float64) float64 {
	lga, _ := math.Lgamma(a)
	front := math.Exp(-x + a*math.Log(x) - lga)
	const eps, tiny, maxIter = 1e-16, 1e-300, 10_000
	if x < a+1 {
		sum, term := 1/a, 1/a
		for n := 1; n < maxIter; n++ {
			term *= x / (a + float64(n))
			sum += term
			if math.Abs(term) < math.Abs(sum)*eps {
				break
			}
		}
		return max(0, 1-sum*front)
	}
	b := x + 1 - a
	c, d := 1/tiny, 1/b
	h := d
	for i := 1; i < maxIter; i++ {
		an := -float64(i) * (float64(i) - a)
		b += 2
		d = an*d + b
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = b + an/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < eps {
			break
		}
	}
	return front * h
}
