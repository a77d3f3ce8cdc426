package api

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	xrate "golang.org/x/time/rate"
)

// Default rate limit of POST /api/exposures, per token and instance.
const (
	DefaultExposureBatchRate  = 20  // batches a second
	DefaultExposureBatchBurst = 100 // batches at once: a client's backlog after an outage
)

// exposureLimit bounds the batches of exposures each token (or, while the
// API is open, each client IP address) sends this instance: rate a second,
// burst at once; a batch over it is answered 429 with Retry-After, and the
// in-app client keeps it for its next flush.
func exposureLimit(rate float64, burst int) echo.MiddlewareFunc {
	return batchLimit("exposures", rate, burst)
}

// batchLimit is exposureLimit for batches of what (a plural noun): POST
// /api/track takes events under the same limits.
func batchLimit(what string, rate float64, burst int) echo.MiddlewareFunc {
	if rate <= 0 {
		rate = DefaultExposureBatchRate
	}
	if burst <= 0 {
		burst = DefaultExposureBatchBurst
	}
	retry := strconv.Itoa(int(math.Ceil(1 / rate)))
	limit := middleware.RateLimiterWithConfig(middleware.RateLimiterConfig{
		Store: middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{
			Rate: xrate.Limit(rate), Burst: burst, ExpiresIn: 3 * time.Minute,
		}),
		IdentifierExtractor: func(c echo.Context) (string, error) {
			if tok, ok := TokenOf(c); ok {
				return "token " + tok.ID, nil
			}
			return "address " + remoteHost(c), nil
		},
		DenyHandler: func(c echo.Context, _ string, _ error) error {
			c.Response().Header().Set("Retry-After", retry)
			return echo.NewHTTPError(http.StatusTooManyRequests,
				fmt.Sprintf("too many batches of %s from this token: at most %g a second (%d at once); send again after %s s", what, rate, burst, retry))
		},
	})
	return limit
}

// remoteHost is the host of the request's connection: not RealIP's
// headers, which any client could vary to escape a limit.
func remoteHost(c echo.Context) string {
	host, _, err := net.SplitHostPort(c.Request().RemoteAddr)
	if err != nil {
		return c.Request().RemoteAddr
	}
	return host
}
