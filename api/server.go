// Package api is rollout's HTTP API: evaluation for apps on their hot path,
// and the JSON API that rollout scripts and the dashboard use to change
// features. Handlers decode, call the rollout domain, and encode.
package api

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/rollout/rollout/rollout"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 1 << 20

// Options configure the API.
type Options struct {
	Logger *slog.Logger // nil: discard
}

// Server holds what the handlers need.
type Server struct {
	svc *rollout.Service
	log *slog.Logger
}

// New returns the API's echo router over svc. Other packages (the dashboard)
// may add their routes to it.
func New(svc *rollout.Service, opts Options) *echo.Echo {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{svc: svc, log: log}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(log)
	e.Use(middleware.RequestID())
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{DisablePrintStack: true}))
	e.Use(limitBody)
	e.Use(CrossOrigin())
	e.Use(logRequests(log))

	e.GET("/evaluate", s.evaluateOne)
	e.POST("/evaluate", s.evaluateMany)
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })

	g := e.Group("/api")
	g.GET("/features", s.listFeatures)
	g.POST("/features", s.createFeature)
	g.GET("/features/:key", s.getFeature)
	g.PATCH("/features/:key", s.patchFeature)
	g.DELETE("/features/:key", s.deleteFeature)
	g.POST("/features/:key/buckets", s.addBucket)
	g.PUT("/features/:key/buckets/:name", s.updateBucket)
	g.DELETE("/features/:key/buckets/:name", s.removeBucket)
	g.PUT("/features/:key/overrides/:user", s.setOverride)
	g.DELETE("/features/:key/overrides/:user", s.clearOverride)
	g.POST("/features/:key/preview", s.preview)
	g.POST("/features/:key/reshuffle", s.reshuffle)
	g.POST("/features/:key/rollback", s.rollback)
	g.GET("/features/:key/versions", s.listVersions)
	g.GET("/features/:key/versions/:version", s.getVersion)
	g.GET("/features/:key/users/:user", s.userHistory)
	g.GET("/features/:key/exposures", s.exposures)
	return e
}

// limitBody bounds the request body; reading past the bound fails with an
// error that decode answers with 413.
func limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.ContentLength > MaxBodyBytes {
			return rollout.Errorf(codeTooLarge, "the request body is larger than %d bytes", MaxBodyBytes)
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, MaxBodyBytes)
		return next(c)
	}
}

// CrossOrigin refuses state-changing requests that a browser sends from
// another site (cross-site request forgery), using the Sec-Fetch-Site and
// Origin headers browsers set. Requests without them, from curl or other
// programs, pass. Evaluation (/evaluate, /ofrep/) is left open to browsers on
// other sites: it changes nothing.
func CrossOrigin() echo.MiddlewareFunc {
	p := http.NewCrossOriginProtection()
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			path := c.Request().URL.Path
			if path == "/evaluate" || strings.HasPrefix(path, "/ofrep/") {
				return next(c)
			}
			if err := p.Check(c.Request()); err != nil {
				return rollout.Errorf(codeForbidden, "cross-origin request refused: changes are accepted only from this server's own pages or from programs such as curl")
			}
			return next(c)
		}
	}
}

// logRequests logs one line per request with its request ID.
func logRequests(log *slog.Logger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if err != nil {
				c.Error(err)
			}
			r := c.Request()
			log.Info("request",
				"request_id", c.Response().Header().Get(echo.HeaderXRequestID),
				"method", r.Method, "path", r.URL.Path, "route", c.Path(),
				"status", c.Response().Status, "bytes", c.Response().Size,
				"duration", time.Since(start))
			return nil
		}
	}
}
