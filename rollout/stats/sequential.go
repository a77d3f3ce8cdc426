package stats

import (
	"math"
)

// Alpha is the error rate of experiments' decisions: an interval of
// Sequential misses the true value, at any of the times it is read, with
// probability at most Alpha.
const Alpha = 0.05

// Tau is the standard deviation of the mixture's normal prior on the
// relative lift (see Sequential): lifts around ±10 % are the ones the test
// is tuned to find soonest. Any Tau keeps the intervals valid; it only
// moves when they become narrow.
const Tau = 0.1

// Sample is what is known of one bucket of an experiment: its users, the
// sum of their per-user values and the sum of their squares (for a
// conversion, the per-user value is 1 when the user converted, else 0).
type Sample struct {
	N          int64
	Sum, SumSq float64
}

// Mean is the sample's mean per user (0 when it has none).
func (s Sample) Mean() float64 {
	if s.N <= 0 {
		return 0
	}
	return s.Sum / float64(s.N)
}

// Variance is the sample's unbiased variance per user (0 with fewer than
// two users).
func (s Sample) Variance() float64 {
	if s.N < 2 {
		return 0
	}
	n := float64(s.N)
	m := s.Sum / n
	return max(0, (s.SumSq-n*m*m)/(n-1))
}

// Interval is a two-sided interval.
type Interval struct {
	Lo, Hi float64
}

// Contains reports whether x lies in the interval.
func (iv Interval) Contains(x float64) bool { return iv.Lo <= x && x <= iv.Hi }

// Lift is the relative difference of a treatment's mean from the
// control's, its always-valid interval and whether that interval leaves
// out 0.
type Lift struct {
	Value       float64
	CI          Interval
	Significant bool
}

// MinUsers is how many users each of two samples needs before Sequential
// reads them: below it the normal approximation is not to be trusted.
const MinUsers = 100

// Sequential compares treatment with control by a mixture sequential
// probability ratio test (mSPRT; Robbins 1970, Johari et al. 2017) on the
// relative lift L = m_T/m_C − 1, whose estimate has, by the delta method,
// the variance
//
//	V = (s²_T/n_T + (m_T/m_C)² s²_C/n_C) / m_C²
//
// With a normal mixture N(0, Tau²) over the true lift, the likelihood ratio
// against "no lift" is
//
//	Λ = sqrt(V/(V+Tau²)) · exp(Tau² L² / (2V(V+Tau²)))
//
// and the set of lifts that a test at level Alpha would not reject is the
// confidence sequence
//
//	L ± sqrt( V(V+Tau²)/Tau² · (ln((V+Tau²)/V) + 2 ln(1/Alpha)) )
//
// which holds the true lift at every time it is computed, with
// probability at least 1 − Alpha, however often it is read (Ville's
// inequality on the mixture martingale). The lift is significant when
// the interval leaves out 0, that is when Λ ≥ 1/Alpha.
//
// ok is false when it cannot tell yet: fewer than MinUsers users in either
// sample, a control mean that is not above 0, or no variance at all.
func Sequential(control, treatment Sample) (Lift, bool) {
	if control.N < MinUsers || treatment.N < MinUsers {
		return Lift{}, false
	}
	mc, mt := control.Mean(), treatment.Mean()
	if !(mc > 0) {
		return Lift{}, false
	}
	r := mt / mc
	v := (treatment.Variance()/float64(treatment.N) + r*r*control.Variance()/float64(control.N)) / (mc * mc)
	if !(v > 0) || math.IsInf(v, 0) {
		return Lift{}, false
	}
	l := r - 1
	hw := halfWidth(v, Tau*Tau)
	iv := Interval{Lo: l - hw, Hi: l + hw}
	return Lift{Value: l, CI: iv, Significant: !iv.Contains(0)}, true
}

// MeanInterval is the always-valid interval of one sample's mean: the
// confidence sequence of Sequential for a mean with variance s²/n, its
// mixture's prior N(0, (Tau·scale)²) with scale the magnitude of the
// means compared (so that it is Tau relative to them). ok is false below
// MinUsers users.
func MeanInterval(s Sample, scale float64) (Interval, bool) {
	if s.N < MinUsers {
		return Interval{}, false
	}
	m := s.Mean()
	v := s.Variance() / float64(s.N)
	tau := Tau * math.Abs(scale)
	if !(v > 0) || !(tau > 0) {
		return Interval{Lo: m, Hi: m}, true
	}
	hw := halfWidth(v, tau*tau)
	return Interval{Lo: m - hw, Hi: m + hw}, true
}

// halfWidth is the half-width of the normal-mixture confidence sequence of
// an estimate with variance v under a prior of variance tau2.
func halfWidth(v, tau2 float64) float64 {
	return math.Sqrt(v * (v + tau2) / tau2 * (math.Log((v+tau2)/v) + 2*math.Log(1/Alpha)))
}
