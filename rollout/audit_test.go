package rollout_test

import (
	"testing"

	"github.com/rollout/rollout/rollout/ramp"
)

func TestRampActorFor(t *testing.T) {
	for actor, want := range map[string]string{"alice": "ramp, started by alice", "": "ramp", "anonymous": "ramp", "ramp": "ramp"} {
		if got := ramp.ActorFor(ramp.Ramp{Actor: actor}); got != want {
			t.Errorf("RampActorFor(started by %q) = %q, want %q", actor, got, want)
		}
	}
}
