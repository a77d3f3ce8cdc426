package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
)

// listSessions is GET /api/sessions: the live sessions of people signed in
// with single sign-on, oldest first, as {"sessions": [...]}.
func (s *Server) listSessions(c echo.Context) error {
	tokens, err := s.tokens()
	if err != nil {
		return err
	}
	all, err := tokens.Sessions(c.Request().Context())
	if err != nil {
		return err
	}
	if all == nil {
		all = []auth.Session{}
	}
	return c.JSON(http.StatusOK, map[string]any{"sessions": all})
}

// revokeSession is DELETE /api/sessions/ID: the person's session ID stops
// working on this instance at once and on others at their next refresh;
// 204. 404 when no live session has that ID.
func (s *Server) revokeSession(c echo.Context) error {
	tokens, err := s.tokens()
	if err != nil {
		return err
	}
	id := c.Param("id")
	if len(id) > 64 {
		return feature.Errorf(feature.ENotFound, "no live session has that ID: list them with GET /api/sessions")
	}
	if err := tokens.RevokeSession(c.Request().Context(), id, httpActor(c)); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
