package change

import (
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
)

// RampStep sets the replicas of bucket, as a ramp's step (audit.RampStep)
// with the given summary: UpdateBucket, recorded otherwise.
func RampStep(bucket string, replicas int, summary string) Change {
	return UpdateBucket(bucket, &replicas, nil).As(summary, audit.RampStep)
}

// RampFinal sets every bucket but bucket to 0 replicas, and bucket to
// replicas, as a ramp's last step of share 1 (audit.RampStep) with the
// given summary: the other buckets stay, at 0 %, so that the kill switch
// can still serve its fallback and a later ramp can give them users again.
// A change request cannot store it.
func RampFinal(bucket string, replicas int, summary string) Change {
	return Change{
		summary: summary,
		kind:    audit.RampStep,
		apply: func(f *feature.Feature) error {
			for i := range f.Buckets {
				f.Buckets[i].Replicas = 0
				if f.Buckets[i].Name == bucket {
					f.Buckets[i].Replicas = replicas
				}
			}
			return nil
		},
	}
}
