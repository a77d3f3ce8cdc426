package api

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	xrate "golang.org/x/time/rate"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
)

// User lists: segments that name up to feature.MaxListUsers users (see
// rollout/userlist.go), on the segments' routes:
//
//	POST   /api/segments              {"key","description","users":[…]}: a new list
//	PUT    /api/segments/KEY          {"description","users":[…]}: the list's users, all of them
//	POST   /api/segments/KEY/users    {"add":[…],"remove":[…]}: an edit
//
// Each answers the segment (with its size, no IDs), the features it
// changed and what the change does to the list ("users": added, removed,
// size), dry runs too. Their bodies may reach MaxListBodyBytes, which
// holds 100,000 IDs of up to 64 bytes; such uploads are bounded apart
// from the other writes: at most listSlots at once on an instance (one
// per token), and listRate a second per token after a burst of
// listBurst. An edit's route always counts; POST and PUT of
// /api/segments count when their body may pass MaxBodyBytes (a segment
// of conditions never does).

// Limits of the user-list routes.
const (
	// MaxListBodyBytes bounds the body of the routes that take a list.
	MaxListBodyBytes = 8 << 20
	// listSlots is how many list uploads an instance takes at once, and
	// listSlotsPerToken how many of them one token holds.
	listSlots         = 2
	listSlotsPerToken = 1
	// listRate and listBurst bound list uploads per token and instance.
	listRate  = 2
	listBurst = 20
)

// listRequest is the body of POST /api/segments/KEY/users.
type listRequest struct {
	Add    []string `json:"add"`
	Remove []string `json:"remove"`
	guards
}

// listUploads bounds the uploads of user lists: how many run at once,
// per token and in all, and how many a token sends a second.
type listUploads struct {
	slots chan struct{}
	rate  echo.MiddlewareFunc

	mu   sync.Mutex
	held map[string]int // slots held, by who holds them
}

func newListUploads() *listUploads {
	u := &listUploads{slots: make(chan struct{}, listSlots), held: map[string]int{}}
	u.rate = middleware.RateLimiterWithConfig(middleware.RateLimiterConfig{
		Store: middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{
			Rate: xrate.Limit(listRate), Burst: listBurst, ExpiresIn: 3 * time.Minute,
		}),
		IdentifierExtractor: func(c echo.Context) (string, error) { return uploader(c), nil },
		DenyHandler: func(c echo.Context, _ string, _ error) error {
			c.Response().Header().Set("Retry-After", "1")
			return &echo.HTTPError{Code: http.StatusTooManyRequests, Message: "too many user-list uploads in a short time: wait a second and try again"}
		},
	})
	return u
}

// uploader names who sends the request: its token, or its address.
func uploader(c echo.Context) string {
	if tok, ok := TokenOf(c); ok {
		return "token " + tok.ID
	}
	return "ip " + c.RealIP()
}

// middleware bounds the requests of a route that takes lists; always
// counts every request, else only those whose body may pass MaxBodyBytes.
func (u *listUploads) middleware(always bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		limited := u.rate(func(c echo.Context) error { return u.run(c, next) })
		return func(c echo.Context) error {
			if n := c.Request().ContentLength; !always && n >= 0 && n <= MaxBodyBytes {
				return next(c)
			}
			return limited(c)
		}
	}
}

// run calls next in a slot, or refuses at once with 429 and a
// Retry-After when every slot, or as many as one token may hold, is
// taken.
func (u *listUploads) run(c echo.Context, next echo.HandlerFunc) error {
	who := uploader(c)
	u.mu.Lock()
	if u.held[who] >= listSlotsPerToken {
		u.mu.Unlock()
		c.Response().Header().Set("Retry-After", "1")
		return &echo.HTTPError{Code: http.StatusTooManyRequests, Message: "this token uploads " + strconv.Itoa(listSlotsPerToken) + " user list at a time: wait for the last to finish"}
	}
	select {
	case u.slots <- struct{}{}:
	default:
		u.mu.Unlock()
		c.Response().Header().Set("Retry-After", "1")
		return &echo.HTTPError{Code: http.StatusTooManyRequests, Message: "as many user lists are being uploaded as this server takes at once: try again in a second"}
	}
	u.held[who]++
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		if u.held[who]--; u.held[who] <= 0 {
			delete(u.held, who)
		}
		u.mu.Unlock()
		<-u.slots
	}()
	if h := listHook; h != nil {
		h()
	}
	return next(c)
}

// listHook, when set (by tests), is called in a list upload's slot,
// before its body is read.
var listHook func()

// createUserList answers POST /api/segments with users.
func (s *Server) createUserList(c echo.Context, req segmentRequest) error {
	if req.Conditions != nil {
		return badRequest(`a segment has conditions or users, not both: {"key":"beta","users":["u1","u2"]}`)
	}
	return s.writeSegment(c, req.guards, true, func(ctx context.Context, svc *rollout.Service, opts rollout.ChangeOptions) (rollout.SegmentResult, error) {
		return svc.CreateUserList(ctx, req.Key, req.Description, *req.Users, opts)
	})
}

// replaceUserList answers PUT /api/segments/KEY with users.
func (s *Server) replaceUserList(c echo.Context, key string, req segmentRequest) error {
	if req.Conditions != nil {
		return badRequest(`a segment has conditions or users, not both: {"description":"…","users":["u1","u2"]}`)
	}
	return s.writeSegment(c, req.guards, false, func(ctx context.Context, svc *rollout.Service, opts rollout.ChangeOptions) (rollout.SegmentResult, error) {
		return svc.ReplaceUserList(ctx, key, req.Description, *req.Users, opts)
	})
}

// editUserList answers POST /api/segments/KEY/users.
func (s *Server) editUserList(c echo.Context) error {
	var req listRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.Add == nil && req.Remove == nil {
		return badRequest(`give the users to add or remove: {"add":["u1"],"remove":["u2"]}`)
	}
	if len(req.Add)+len(req.Remove) > feature.MaxListUsers {
		return feature.Errorf(feature.EInvalid, "%d users added and removed; one edit names at most %d", len(req.Add)+len(req.Remove), feature.MaxListUsers)
	}
	key := c.Param("key")
	return s.writeSegment(c, req.guards, false, func(ctx context.Context, svc *rollout.Service, opts rollout.ChangeOptions) (rollout.SegmentResult, error) {
		return svc.EditUserList(ctx, key, req.Add, req.Remove, opts)
	})
}
