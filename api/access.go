package api

import "github.com/rollout/rollout/rollout/auth"

// Public marks a route that needs no token.
//
// What a request needs is its route's Access (see Route): looked up by the
// pattern echo matched, never the request path's text. A request that
// matched no route needs nothing (echo answers 404 and no handler of ours
// runs); one whose route was not declared (a method the pattern does not
// serve, echo's 405, or a route added to the router by other means) needs an
// admin token, so that forgetting to declare a route fails closed.
const Public auth.Permission = -1
