module github.com/rollout/rollout/api/client

go 1.26.0

require (
	github.com/open-feature/go-sdk v1.20.0
	github.com/rollout/rollout/rollout/feature v0.0.0
)

require (
	github.com/rollout/rollout/ring v0.0.0 // indirect
	go.uber.org/mock v0.6.0 // indirect
)

replace (
	github.com/rollout/rollout/ring => ../../ring
	github.com/rollout/rollout/rollout/feature => ../../rollout/feature
)
