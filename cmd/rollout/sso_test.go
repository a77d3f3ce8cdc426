package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/web"
)

// TestServeSSOFlags: the --oidc-* flags and their ROLLOUT_OIDC_* variables
// make the single sign-on's configuration; incomplete or wrong ones are
// refused with the flag's name, and none means no single sign-on.
func TestServeSSOFlags(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(dir, "open")
	if err := os.WriteFile(open, []byte("s3cret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	parse := func(args []string, env map[string]string) (*auth.Role, map[string]web.Grant, string, error) {
		s, err := parseServe(args, &bytes.Buffer{}, &bytes.Buffer{}, func(k string) string { return env[k] })
		if err != nil || s.SSO == nil {
			return nil, nil, "", err
		}
		return &s.SSO.DefaultRole, s.SSO.Roles, s.SSO.ClientSecret + "|" + s.SSO.Issuer + "|" + s.SSO.ClientID + "|" + s.SSO.RoleClaim, nil
	}
	def, roles, rest, err := parse([]string{"--oidc-issuer", "https://id.example.com/realms/r", "--oidc-client-id", "rollout",
		"--oidc-client-secret-file", secret, "--oidc-roles", "flag-admins=admin, pm=editor, qa=viewer@staging"}, nil)
	if err != nil || *def != auth.RoleViewer || roles["flag-admins"] != (web.Grant{Role: auth.RoleAdmin}) || roles["pm"] != (web.Grant{Role: auth.RoleEditor}) ||
		roles["qa"] != (web.Grant{Role: auth.RoleViewer, Environment: "staging"}) || len(roles) != 3 ||
		rest != "s3cret|https://id.example.com/realms/r|rollout|groups" {
		t.Fatalf("flags: default %v, roles %v, %q, %v", def, roles, rest, err)
	}
	def, roles, rest, err = parse(nil, map[string]string{"ROLLOUT_OIDC_ISSUER": "https://id.example.com", "ROLLOUT_OIDC_CLIENT_ID": "r",
		"ROLLOUT_OIDC_ROLE_CLAIM": "roles", "ROLLOUT_OIDC_ROLES": "ops=editor", "ROLLOUT_OIDC_DEFAULT_ROLE": "editor"})
	if err != nil || *def != auth.RoleEditor || roles["ops"] != (web.Grant{Role: auth.RoleEditor}) || rest != "|https://id.example.com|r|roles" {
		t.Fatalf("environment: default %v, roles %v, %q, %v", def, roles, rest, err)
	}
	if def, _, _, err := parse(nil, nil); def != nil || err != nil {
		t.Errorf("no flags: SSO %v, %v; want none", def, err)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--oidc-issuer", "https://id.example.com"}, "--oidc-client-id"},
		{[]string{"--oidc-client-id", "r"}, "--oidc-issuer"},
		{[]string{"--oidc-issuer", "id.example.com", "--oidc-client-id", "r"}, "--oidc-issuer"},
		{[]string{"--oidc-issuer", "https://id.example.com", "--oidc-client-id", "r", "--oidc-roles", "pm=root"}, "--oidc-roles"},
		{[]string{"--oidc-issuer", "https://id.example.com", "--oidc-client-id", "r", "--oidc-roles", "pm"}, "--oidc-roles"},
		{[]string{"--oidc-issuer", "https://id.example.com", "--oidc-client-id", "r", "--oidc-roles", "pm=editor@Bad Env"}, "--oidc-roles"},
		{[]string{"--oidc-issuer", "https://id.example.com", "--oidc-client-id", "r", "--oidc-default-role", "sdk"}, "--oidc-default-role"},
		{[]string{"--oidc-issuer", "https://id.example.com", "--oidc-client-id", "r", "--oidc-client-secret-file", open}, "chmod"},
		{[]string{"--oidc-issuer", "https://id.example.com", "--oidc-client-id", "r", "--oidc-client-secret-file", filepath.Join(dir, "none")}, "--oidc-client-secret-file"},
	} {
		if _, _, _, err := parse(bad.args, nil); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: err = %v, want one naming %s", bad.args, err, bad.want)
		}
	}
}
