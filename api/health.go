package api

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rollout/rollout/rollout/feature"
)

// readyTimeout bounds one readiness check of the database.
const readyTimeout = 2 * time.Second

// healthz is GET /healthz: the process is up and answering. HEAD answers
// the same without the body, as load balancers' checks expect.
func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz is GET /readyz: ready to serve when the features are loaded and
// the database can be reached, so that writes and history work too;
// otherwise 503 with the reason. HEAD answers the same without the body.
func (s *Server) readyz(c echo.Context) error {
	snap := s.in(c).Snapshot()
	if snap == nil {
		return s.notReady(c, "the features are not loaded yet", nil)
	}
	if s.ready != nil {
		ctx, cancel := context.WithTimeout(c.Request().Context(), readyTimeout)
		defer cancel()
		if err := s.ready(ctx); err != nil {
			return s.notReady(c, "the database cannot be reached: "+feature.ErrorMessage(err), err)
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"status": "ready", "features": snap.Len()})
}

func (s *Server) notReady(c echo.Context, reason string, cause error) error {
	s.log.Warn("not ready", "request_id", c.Response().Header().Get(echo.HeaderXRequestID), "reason", reason, "err", cause)
	return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": reason})
}
