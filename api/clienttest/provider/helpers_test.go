package provider_test

import (
	"context"
	"testing"
	"time"

	"github.com/open-feature/go-sdk/openfeature"

	"github.com/rollout/rollout/api/client"
	"github.com/rollout/rollout/api/client/provider"
	"github.com/rollout/rollout/api/clienttest/internal/testserver"
)

// newClientOf returns a client of s, closed when t ends.
func newClientOf(t testing.TB, s *testserver.Server) *client.Client {
	t.Helper()
	c, err := client.New(context.Background(), client.Config{URL: s.URL, PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// sdkOver returns an OpenFeature client of a domain of its own (the test's
// name) whose provider is over c.
func sdkOver(t testing.TB, c *client.Client) *openfeature.Client {
	t.Helper()
	domain := t.Name()
	if err := openfeature.SetNamedProviderAndWait(domain, provider.New(c)); err != nil {
		t.Fatal(err)
	}
	return openfeature.NewClient(domain)
}
