package api

// RouteAccess is routeAccess, for tests of the access table.
var RouteAccess = routeAccess
