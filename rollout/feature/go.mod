module github.com/rollout/rollout/rollout/feature

go 1.26.0

require github.com/rollout/rollout/ring v0.0.0

replace github.com/rollout/rollout/ring => ../../ring
