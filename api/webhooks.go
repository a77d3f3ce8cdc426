package api

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/webhook"
)

// Webhooks over HTTP, for admins: register a URL that receives every
// audited event, list them with their state, read one with its delivery
// log, resume a paused one, delete one. Delivery itself is package
// webhook's. The answer that creates a webhook holds its secret, once, so
// these routes keep no Idempotency-Key answer (see idempotentRoute).

// webhooks returns the server's webhooks, or an error saying there are
// none on this server.
func (s *Server) webhooks() (*webhook.Hooks, error) {
	if s.hooks == nil {
		return nil, feature.Errorf(feature.ENotFound, "this server does not deliver webhooks")
	}
	return s.hooks, nil
}

type createWebhookRequest struct {
	URL    string   `json:"url"`
	Secret string   `json:"secret"`
	Events []string `json:"events"`
}

// createdWebhook answers POST /api/webhooks: the webhook and its secret,
// shown this once.
type createdWebhook struct {
	webhook.Hook
	Secret string `json:"secret"`
}

// webhookDetail answers GET /api/webhooks/ID: the webhook and its latest
// attempts, newest first.
type webhookDetail struct {
	webhook.Hook
	Deliveries []webhook.Delivery `json:"deliveries"`
}

// createWebhook is POST /api/webhooks {"url","secret","events"}: 201 with
// the webhook and its secret (made when none is given). 422 for a bad URL,
// secret or event kind, 409 at webhook.MaxHooks.
func (s *Server) createWebhook(c echo.Context) error {
	hooks, err := s.webhooks()
	if err != nil {
		return err
	}
	var req createWebhookRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	h, err := hooks.Create(c.Request().Context(), strings.TrimSpace(req.URL), req.Secret, req.Events, httpActor(c))
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	c.Response().Header().Set(echo.HeaderLocation, "/api/webhooks/"+h.ID)
	return c.JSON(http.StatusCreated, createdWebhook{Hook: h, Secret: h.Secret})
}

// listWebhooks is GET /api/webhooks: every webhook, oldest first, with its
// state (and why a paused one was paused); never a secret.
func (s *Server) listWebhooks(c echo.Context) error {
	hooks, err := s.webhooks()
	if err != nil {
		return err
	}
	all, err := hooks.List(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"webhooks": all})
}

// getWebhook is GET /api/webhooks/ID: the webhook and its latest attempts.
func (s *Server) getWebhook(c echo.Context) error {
	hooks, err := s.webhooks()
	if err != nil {
		return err
	}
	h, log, err := hooks.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, webhookDetail{Hook: h, Deliveries: log})
}

// deleteWebhook is DELETE /api/webhooks/ID: 204; 404 when there is none.
func (s *Server) deleteWebhook(c echo.Context) error {
	hooks, err := s.webhooks()
	if err != nil {
		return err
	}
	if err := hooks.Delete(c.Request().Context(), c.Param("id"), httpActor(c)); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// resumeWebhook is POST /api/webhooks/ID/resume: the paused webhook is
// active again and delivery goes on from the event it stopped at; 200 with
// the webhook. 409 when it is not paused.
func (s *Server) resumeWebhook(c echo.Context) error {
	hooks, err := s.webhooks()
	if err != nil {
		return err
	}
	ctx, id := c.Request().Context(), c.Param("id")
	if err := hooks.Resume(ctx, id, httpActor(c)); err != nil {
		return err
	}
	h, log, err := hooks.Get(ctx, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, webhookDetail{Hook: h, Deliveries: log})
}
