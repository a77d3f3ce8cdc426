package api

import (
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	xrate "golang.org/x/time/rate"

	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
)

// API tokens over HTTP: what `rollout token` does on the server's command
// line, for admins. A new token's secret is in the answer that creates it,
// once: only its SHA-256 is stored, and the route keeps no Idempotency-Key
// answer (see idempotentRoute).

// Limits of the token routes.
const (
	// MaxActiveTokens is how many active tokens may exist at once.
	MaxActiveTokens = 500
	// maxRevokedListed is how many revoked tokens GET /api/tokens lists
	// at most, the most recently revoked.
	maxRevokedListed = 100
	// tokenCreateRate and tokenCreateBurst bound POST /api/tokens per
	// admin token and instance: a burst, then one a second.
	tokenCreateRate  = 1
	tokenCreateBurst = 20
)

// maxActiveTokens is MaxActiveTokens; tests lower it.
var maxActiveTokens = MaxActiveTokens

// tokenCreateLimit bounds the tokens each admin token (or, while the API is
// open, each client address) creates on this instance; over it, 429.
func tokenCreateLimit() echo.MiddlewareFunc {
	return middleware.RateLimiterWithConfig(middleware.RateLimiterConfig{
		Store: middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{
			Rate: xrate.Limit(tokenCreateRate), Burst: tokenCreateBurst, ExpiresIn: 3 * time.Minute,
		}),
		IdentifierExtractor: func(c echo.Context) (string, error) {
			if tok, ok := TokenOf(c); ok {
				return "token " + tok.ID, nil
			}
			return "ip " + c.RealIP(), nil
		},
		ErrorHandler: func(c echo.Context, err error) error {
			return feature.Errorf(feature.EUnavailable, "could not tell who creates the token: %v", err)
		},
		DenyHandler: func(c echo.Context, _ string, _ error) error {
			c.Response().Header().Set("Retry-After", "1")
			return &echo.HTTPError{Code: http.StatusTooManyRequests, Message: "too many tokens created in a short time: wait a second and try again"}
		},
	})
}

// tokenView is a token as the API shows it (never its secret or hash).
type tokenView struct {
	auth.Token
	Active bool `json:"active"`
}

// createdToken answers POST /api/tokens: the token and its secret, shown
// this once.
type createdToken struct {
	tokenView
	Secret string `json:"token"`
}

// tokens returns the server's tokens, or an error saying there are none to
// manage (an API without access control).
func (s *Server) tokens() (*auth.Tokens, error) {
	if s.auth == nil || s.auth.tokens == nil {
		return nil, feature.Errorf(feature.ENotFound, "this server has no access control, so no tokens to manage")
	}
	return s.auth.tokens, nil
}

// listTokens is GET /api/tokens: the active tokens, oldest first, then at
// most maxRevokedListed revoked ones, the most recently revoked first; each
// with when it was last used (to about a minute).
func (s *Server) listTokens(c echo.Context) error {
	tokens, err := s.tokens()
	if err != nil {
		return err
	}
	all, err := tokens.List(c.Request().Context())
	if err != nil {
		return err
	}
	active := []tokenView{}
	var revoked []tokenView
	me, _ := TokenOf(c)
	for _, t := range all {
		if me.Environment != "" && t.Environment != me.Environment {
			continue // a scoped admin sees its environment's tokens alone
		}
		if t.RevokedAt == nil {
			active = append(active, tokenView{Token: t, Active: true})
		} else {
			revoked = append(revoked, tokenView{Token: t})
		}
	}
	slices.SortStableFunc(revoked, func(a, b tokenView) int { return b.RevokedAt.Compare(*a.RevokedAt) })
	if len(revoked) > maxRevokedListed {
		revoked = revoked[:maxRevokedListed]
	}
	return c.JSON(http.StatusOK, map[string]any{"tokens": append(active, revoked...)})
}

type createTokenRequest struct {
	Name string    `json:"name"`
	Role auth.Role `json:"role"`
	// Environment scopes the token to one environment ("": every one, or
	// production for an app role). A scoped admin makes tokens of its own
	// environment only.
	Environment string `json:"environment"`
}

// createToken is POST /api/tokens {"name","role"}: 201 with the token and,
// in "token", its secret, shown this once. 409 when an active token has
// the name or MaxActiveTokens are active.
func (s *Server) createToken(c echo.Context) error {
	tokens, err := s.tokens()
	if err != nil {
		return err
	}
	var req createTokenRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if err := (auth.Token{Name: req.Name, Role: req.Role}).Validate(); err != nil {
		return err
	}
	if me, ok := TokenOf(c); ok && me.Environment != "" {
		if req.Environment != "" && req.Environment != me.Environment {
			return feature.Errorf(codeForbidden, "token %q is scoped to environment %s: it makes tokens of that environment only", me.Name, me.Environment)
		}
		req.Environment = me.Environment
	}
	if req.Environment != "" {
		if _, ok := s.envs.Get(req.Environment); !ok {
			return unknownEnvironment(req.Environment)
		}
	}
	ctx := c.Request().Context()
	all, err := tokens.List(ctx)
	if err != nil {
		return err
	}
	n := 0
	for _, t := range all {
		if t.RevokedAt == nil {
			n++
		}
	}
	if n >= maxActiveTokens {
		return feature.Errorf(feature.EConflict, "there are %d active tokens, the most there may be: revoke tokens no longer used first", n)
	}
	tok, secret, err := tokens.CreateIn(ctx, req.Name, req.Role, req.Environment, tokens.Now(), httpActor(c))
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	return c.JSON(http.StatusCreated, createdToken{tokenView: tokenView{Token: tok, Active: true}, Secret: secret})
}

// revokeToken is DELETE /api/tokens/ID: the active token ID stops working
// on this instance at once and on others at their next refresh; 204. 404
// when no active token has that ID.
func (s *Server) revokeToken(c echo.Context) error {
	tokens, err := s.tokens()
	if err != nil {
		return err
	}
	id := c.Param("id")
	tok, ok := tokens.ByID(id)
	if !ok { // made on another instance, maybe: read the store
		if err := tokens.Refresh(c.Request().Context()); err != nil {
			return err
		}
		tok, ok = tokens.ByID(id)
	}
	if me, mine := TokenOf(c); ok && mine && me.Environment != "" && tok.Environment != me.Environment {
		ok = false // a scoped admin sees its environment's tokens alone
	}
	if !ok {
		return feature.Errorf(feature.ENotFound, "no active token has ID %q: list them with GET /api/tokens", id)
	}
	if err := tokens.RevokeBy(c.Request().Context(), tok.Name, tokens.Now(), httpActor(c)); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// httpActor is who a token route acts as: the request's token, or
// "anonymous" while the API is open (no token exists yet).
func httpActor(c echo.Context) string {
	if a := actorOf(c); a != "" {
		return a
	}
	return "anonymous"
}
