package auth

import "slices"

// Role is what a token may do.
type Role string

// The roles, from most to least powerful.
const (
	RoleAdmin  Role = "admin"  // everything, tokens included
	RoleEditor Role = "editor" // read and change features
	RoleViewer Role = "viewer" // read features, the dashboard and metrics
	// RoleSDK is for servers that evaluate in their own process (package
	// client): evaluation, the sync API, which serves every feature's
	// configuration, and exposures.
	RoleSDK Role = "sdk"
	// RoleEvaluate is the app role before RoleSDK and RoleClient split
	// it: it may do what RoleSDK may. Its tokens keep working; new ones
	// should take one of the two.
	RoleEvaluate Role = "evaluate"
	// RoleClient is for browsers and other code shipped to users: only
	// evaluation, /evaluate and OFREP, never the sync API.
	RoleClient Role = "client"
)

// Roles are the roles, from most to least powerful.
var Roles = []Role{RoleAdmin, RoleEditor, RoleViewer, RoleSDK, RoleEvaluate, RoleClient}

// Permission is what a request needs.
type Permission int

// The permissions requests need, each granting the ones before.
const (
	PermEvaluate Permission = iota // evaluate features
	PermSync                       // read every feature's sync form, send exposures
	PermRead                       // read features and their history
	PermWrite                      // change features
	PermAdmin                      // manage tokens
)

// ForApps reports whether p is what the routes of apps need (evaluation,
// the sync API, exposures), as opposed to those of people and tools.
func (p Permission) ForApps() bool { return p == PermEvaluate || p == PermSync }

// Allows reports whether role r grants permission p.
func (r Role) Allows(p Permission) bool {
	switch r {
	case RoleAdmin:
		return true
	case RoleEditor:
		return p <= PermWrite
	case RoleViewer:
		return p <= PermRead
	case RoleSDK, RoleEvaluate:
		return p <= PermSync
	case RoleClient:
		return p == PermEvaluate
	}
	return false
}

// Valid reports whether r is one of the roles.
func (r Role) Valid() bool { return slices.Contains(Roles, r) }

// App reports whether r is a role of apps (sdk, evaluate, client), whose
// tokens are always scoped to one environment.
func (r Role) App() bool { return r == RoleSDK || r == RoleEvaluate || r == RoleClient }
