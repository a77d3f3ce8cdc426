package serve

import (
	"errors"
	"net/url"
	"strings"
)

// Database names. --db is a SQLite file or a PostgreSQL DSN in either of
// PostgreSQL's forms: a postgres:// (postgresql://) URL, or key=value
// pairs ("host=db user=app password=… dbname=rollout"). A DSN may hold a
// password, in the URL's user info or as a password (or sslpassword)
// parameter of either form: everything the binaries print about a database
// goes through RedactDSN, and errors from opening one through redactErr.

// IsPostgres reports whether db names a PostgreSQL database, as a URL or
// as key=value pairs, rather than a SQLite file.
func IsPostgres(db string) bool { return isPostgresURL(db) || isKeyValueDSN(db) }

// isPostgresURL reports whether db starts with the scheme postgres:// or
// postgresql://, in any case.
func isPostgresURL(db string) bool {
	scheme, _, ok := strings.Cut(db, "://")
	return ok && (strings.EqualFold(scheme, "postgres") || strings.EqualFold(scheme, "postgresql"))
}

// isKeyValueDSN reports whether db is PostgreSQL's key=value form: its
// first word is one of libpq's connection keywords followed by '='.
func isKeyValueDSN(db string) bool {
	key, _, ok := strings.Cut(strings.TrimLeft(db, " \t\n\r"), "=")
	return ok && pgKeywords[strings.TrimRight(key, " \t\n\r")]
}

// pgKeywords are libpq's connection keywords (and pgx's own), in the
// key=value form.
var pgKeywords = map[string]bool{
	"host": true, "hostaddr": true, "port": true, "dbname": true, "user": true, "password": true,
	"passfile": true, "channel_binding": true, "connect_timeout": true, "client_encoding": true,
	"options": true, "application_name": true, "fallback_application_name": true, "keepalives": true,
	"sslmode": true, "sslcert": true, "sslkey": true, "sslpassword": true, "sslrootcert": true,
	"sslsni": true, "sslnegotiation": true, "require_auth": true, "service": true, "servicefile": true,
	"target_session_attrs": true, "load_balance_hosts": true, "gssencmode": true, "krbsrvname": true,
	"min_read_buffer_size": true, "pool_max_conns": true, "pool_min_conns": true, "statement_cache_capacity": true,
}

// secretParams are the parameters, in either form, whose values are secret.
func secretParam(name string) bool {
	return strings.EqualFold(name, "password") || strings.EqualFold(name, "sslpassword")
}

const mask = "xxxxx"

// RedactDSN returns db fit to print: a SQLite file name as it is; a
// PostgreSQL DSN with every password replaced by xxxxx; one that does not
// parse, which may hide a password anywhere, reduced to its form.
func RedactDSN(db string) string {
	switch {
	case isPostgresURL(db):
		return redactURL(db)
	case isKeyValueDSN(db):
		return redactKeyValues(db)
	}
	return db
}

func redactURL(db string) string {
	u, err := url.Parse(db)
	if err != nil {
		scheme, _, _ := strings.Cut(db, "://")
		return scheme + "://… (a URL that does not parse, not shown)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), mask)
	}
	if u.RawQuery != "" {
		params := strings.Split(u.RawQuery, "&")
		for i, p := range params {
			name, _, _ := strings.Cut(p, "=")
			if n, err := url.QueryUnescape(name); err == nil && secretParam(n) || secretParam(name) {
				params[i] = name + "=" + mask
			}
		}
		u.RawQuery = strings.Join(params, "&")
	}
	return u.String()
}

func redactKeyValues(db string) string {
	pairs, err := keyValues(db)
	if err != nil {
		return "PostgreSQL key=value settings that do not parse, not shown"
	}
	var b strings.Builder
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(p.key + "=")
		if secretParam(p.key) {
			b.WriteString(mask)
		} else {
			b.WriteString(p.raw)
		}
	}
	return b.String()
}

type keyValue struct {
	key        string
	raw, value string // the value as written (quoted or not) and as meant
}

// keyValues splits PostgreSQL's key=value form as libpq does: a value is
// single-quoted, or runs to the next white space; a backslash escapes the
// next character in either.
func keyValues(s string) ([]keyValue, error) {
	var out []keyValue
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' }
	i := 0
	for {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i == len(s) {
			return out, nil
		}
		start := i
		for i < len(s) && s[i] != '=' && !isSpace(s[i]) {
			i++
		}
		key := s[start:i]
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if key == "" || i == len(s) || s[i] != '=' {
			return nil, errors.New("a setting without '='")
		}
		i++
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		start = i
		var value strings.Builder
		quoted := i < len(s) && s[i] == '\''
		if quoted {
			i++
		}
		for ; i < len(s); i++ {
			c := s[i]
			if c == '\\' && i+1 < len(s) {
				i++
				value.WriteByte(s[i])
				continue
			}
			if quoted && c == '\'' || !quoted && isSpace(c) {
				break
			}
			value.WriteByte(c)
		}
		if quoted {
			if i == len(s) {
				return nil, errors.New("an unterminated quoted value")
			}
			i++ // past the closing quote
		}
		out = append(out, keyValue{key: key, raw: s[start:i], value: value.String()})
	}
}

// secrets returns the passwords db holds, as written and as meant, for
// redactErr to look for.
func secrets(db string) []string {
	var out []string
	add := func(s ...string) {
		for _, v := range s {
			if len(v) >= 3 { // shorter ones would garble every message
				out = append(out, v)
			}
		}
	}
	switch {
	case isPostgresURL(db):
		rest := db[strings.Index(db, "://")+3:]
		if at := strings.IndexAny(rest, "@/"); at >= 0 && rest[at] == '@' {
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
				dec, _ := url.PathUnescape(pw)
				add(pw, dec)
			}
		}
		if _, query, ok := strings.Cut(rest, "?"); ok {
			for _, p := range strings.Split(query, "&") {
				name, v, _ := strings.Cut(p, "=")
				if n, _ := url.QueryUnescape(name); secretParam(n) || secretParam(name) {
					dec, _ := url.QueryUnescape(v)
					add(v, dec)
				}
			}
		}
	case isKeyValueDSN(db):
		pairs, _ := keyValues(db)
		for _, p := range pairs {
			if secretParam(p.key) {
				add(p.raw, p.value)
			}
		}
		if len(pairs) == 0 { // does not parse: hide every value that may be one
			for _, f := range strings.Fields(db) {
				if k, v, ok := strings.Cut(f, "="); ok && secretParam(k) {
					add(v, strings.Trim(v, "'"))
				}
			}
		}
	}
	return out
}

// redactErr returns err, or, when its message shows a password of db, an
// error that wraps it with each such password replaced by xxxxx.
func redactErr(err error, db string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, s := range secrets(db) {
		msg = strings.ReplaceAll(msg, s, mask)
	}
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
