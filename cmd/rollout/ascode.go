package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/rollout/rollout/internal/docfile"
	"github.com/rollout/rollout/rollout"
)

// Rollouts as code: export, plan and apply are clients of the HTTP API
// (GET /api/export, POST /api/plan, POST /api/apply); the server plans and
// computes every churn.

// exitCode is an error that only sets the process's exit status: plan
// exits 2 when the document changes something (as terraform plan
// -detailed-exitcode does).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// exitChanges is plan's exit status when the document changes something.
const exitChanges exitCode = 2

// clientTimeout bounds each request of export, plan and apply.
const clientTimeout = 2 * time.Minute

// apiClient is the API of one server, with a token.
type apiClient struct {
	server, token string
	env           string // the environment of every request ("": the token's, or production)
	http          *http.Client
}

// clientFlags defines --server, --token and --env, whose defaults come
// from ROLLOUT_SERVER, ROLLOUT_TOKEN and ROLLOUT_ENV.
func clientFlags(fs *flag.FlagSet, getenv func(string) string) (server, token, env *string) {
	server = fs.String("server", getenv("ROLLOUT_SERVER"), "the server's URL, such as https://rollout.example.com (env ROLLOUT_SERVER)")
	token = fs.String("token", "", "an API token: viewer for export and plan, editor for apply (env ROLLOUT_TOKEN)")
	env = fs.String("env", getenv("ROLLOUT_ENV"), "the environment, such as staging (env ROLLOUT_ENV; default: the token's, or production)")
	return server, token, env
}

func newClient(server, token, env string, getenv func(string) string) (*apiClient, error) {
	if server == "" {
		return nil, errors.New("give the server's URL with --server or ROLLOUT_SERVER")
	}
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q is not an http:// or https:// URL", server)
	}
	if token == "" {
		token = getenv("ROLLOUT_TOKEN")
	}
	return &apiClient{server: strings.TrimRight(server, "/"), token: token, env: env, http: &http.Client{Timeout: clientTimeout}}, nil
}

// do sends a request with body (JSON) and returns the answer's body; an
// error answer is an error with the server's message.
func (c *apiClient) do(ctx context.Context, method, path string, body []byte, header ...string) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	if c.env != "" {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		path += sep + "env=" + url.QueryEscape(c.env)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.server+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 4*rollout.MaxDocumentBytes))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		return data, nil
	}
	var e struct {
		Error struct{ Code, Message string }
	}
	if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
		return nil, &apiError{Status: res.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	return nil, &apiError{Status: res.StatusCode, Message: strings.TrimSpace(string(data[:min(len(data), 300)]))}
}

// apiError is an error answer of the server.
type apiError struct {
	Status        int
	Code, Message string
}

func (e *apiError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("the server answered %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("the server refused (%d %s): %s", e.Status, e.Code, e.Message)
}

const exportSynopsis = `usage: rollout export --server URL [--env E] [--format yaml|json] [--out FILE]

Writes the server's features as a document (YAML by default), each bucket
with its exact share of users: planning it changes nothing.
`

func runExport(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	server, token, env := clientFlags(fs, getenv)
	format := fs.String("format", docfile.YAML, "yaml or json")
	out := fs.String("out", "", "write to this file rather than to standard output")
	rest, err := parseFlags(fs, exportSynopsis, args, stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("export takes no arguments, got %q", rest)
	}
	if *format != docfile.YAML && *format != docfile.JSON {
		return fmt.Errorf("--format %q: give yaml or json", *format)
	}
	c, err := newClient(*server, *token, *env, getenv)
	if err != nil {
		return err
	}
	data, err := c.do(ctx, http.MethodGet, "/api/export?format="+*format, nil)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if *out != "" {
		return os.WriteFile(*out, data, 0o644)
	}
	_, err = stdout.Write(data)
	return err
}

const planSynopsis = `usage: rollout plan -f FILE --server URL [--env E] [--format text|json] [--out PLAN]

Prints what the document FILE (YAML or JSON) would change on the server,
feature by feature, with the exact churn of each change (from→to moves,
cross-moves, range bucketing's churn for comparison), the versions it read
and the total. Nothing is stored. Exits 0 when nothing would change, 2 when
something would, 1 on an error. --out saves the plan for 'rollout apply PLAN'.
`

func runPlan(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	server, token, env := clientFlags(fs, getenv)
	file := fs.String("f", "", "the document: a YAML or JSON file")
	format := fs.String("format", "text", "text or json")
	out := fs.String("out", "", "save the plan (JSON) to this file, for 'rollout apply PLAN'")
	rest, err := parseFlags(fs, planSynopsis, args, stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("plan takes no arguments, got %q: give the document with -f", rest)
	}
	if *format != "text" && *format != "json" {
		return fmt.Errorf("--format %q: give text or json", *format)
	}
	if *file == "" {
		return errors.New("give the document with -f FILE")
	}
	doc, err := readDocument(*file)
	if err != nil {
		return err
	}
	c, err := newClient(*server, *token, *env, getenv)
	if err != nil {
		return err
	}
	p, raw, err := c.plan(ctx, doc)
	if ae, ok := errors.AsType[*apiError](err); ok && ae.Status == http.StatusUnprocessableEntity {
		// What only the server sees (an in_segment naming a segment
		// neither the file nor the server has): at its line too.
		if data, rerr := os.ReadFile(*file); rerr == nil {
			if le := docfile.ServerError(*file, data, ae.Message); le != nil {
				return le
			}
		}
	}
	if err != nil {
		return err
	}
	if *out != "" {
		if err := os.WriteFile(*out, raw, 0o644); err != nil {
			return err
		}
	}
	if *format == "json" {
		_, err = stdout.Write(raw)
	} else {
		err = printPlan(stdout, p)
	}
	if err != nil {
		return err
	}
	if p.Changed > 0 {
		return exitChanges
	}
	return nil
}

// readDocument reads and checks the document in file.
func readDocument(file string) (rollout.Document, error) {
	f, err := os.Open(file)
	if err != nil {
		return rollout.Document{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, rollout.MaxDocumentBytes+1))
	if err != nil {
		return rollout.Document{}, fmt.Errorf("read %s: %w", file, err)
	}
	if len(data) > rollout.MaxDocumentBytes {
		size := int64(len(data))
		if fi, err := f.Stat(); err == nil {
			size = fi.Size()
		}
		return rollout.Document{}, docfile.TooLarge(file, size)
	}
	return docfile.Parse(file, data)
}

// plan posts doc to /api/plan and returns the plan, decoded and as sent.
func (c *apiClient) plan(ctx context.Context, doc rollout.Document) (rollout.DocumentPlan, []byte, error) {
	body, err := json.Marshal(doc)
	if err != nil {
		return rollout.DocumentPlan{}, nil, err
	}
	raw, err := c.do(ctx, http.MethodPost, "/api/plan", body)
	if err != nil {
		return rollout.DocumentPlan{}, nil, fmt.Errorf("plan: %w", err)
	}
	var p rollout.DocumentPlan
	if err := json.Unmarshal(raw, &p); err != nil {
		return rollout.DocumentPlan{}, nil, fmt.Errorf("plan: the answer is not a plan: %w", err)
	}
	return p, raw, nil
}

// printPlan writes p for people.
func printPlan(w io.Writer, p rollout.DocumentPlan) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Plan of %d features (server revision %d):\n", len(p.Changes), p.Revision)
	for _, ch := range p.Changes {
		switch ch.Action {
		case rollout.ActionNone:
			fmt.Fprintf(&b, "  = %s: no change (version %d)\n", ch.Feature, ch.FromVersion)
			continue
		case rollout.ActionCreate:
			fmt.Fprintf(&b, "  + %s: create (version 1), churn %s\n", ch.Feature, pct(ch.Churn))
		default:
			fmt.Fprintf(&b, "  ~ %s: update %s, version %d → %d, churn %s (range bucketing: %s)\n",
				ch.Feature, strings.Join(ch.Fields, ", "), ch.FromVersion, ch.ToVersion, pct(ch.Churn), pct(ch.RangeChurn))
		}
		for _, m := range ch.Moves {
			fmt.Fprintf(&b, "      %s → %s: %s\n", orNobody(m.From), orNobody(m.To), pct(m.Share))
		}
		if ch.Action == rollout.ActionUpdate && ch.Churn > 0 {
			if ch.Nested {
				fmt.Fprintf(&b, "      nested: users move only into growing buckets and out of shrinking ones\n")
			} else {
				fmt.Fprintf(&b, "      cross-moves between running buckets: %s\n", pct(ch.CrossChurn))
			}
		}
		if ch.Plan != nil && ch.Plan.Replanned {
			fmt.Fprintf(&b, "      the planner first made the ring finer, for tolerance %v, which moves users once: a larger tolerance may move fewer\n", ch.Plan.Tolerance)
		}
		if ch.Plan != nil && ch.Plan.CutShort {
			fmt.Fprintf(&b, "      the planner stopped early (%s): a longer search might move fewer users\n", ch.Plan.CutReason)
		}
		if n := len(ch.Report.OverrideChanges); n > 0 {
			fmt.Fprintf(&b, "      %d overridden user(s) change bucket\n", n)
		}
		for _, r := range ch.Rules {
			fmt.Fprintf(&b, "      rules: %s\n", r.Text)
		}
	}
	for _, sc := range p.Segments {
		switch sc.Action {
		case rollout.ActionNone:
			fmt.Fprintf(&b, "  = segment %s: no change (version %d)\n", sc.Segment, sc.FromVersion)
			continue
		case rollout.ActionCreate:
			fmt.Fprintf(&b, "  + segment %s: create (version 1): %s\n", sc.Segment, sc.Conditions)
		default:
			fmt.Fprintf(&b, "  ~ segment %s: update %s, version %d → %d: %s\n", sc.Segment, strings.Join(sc.Fields, ", "), sc.FromVersion, sc.ToVersion, sc.Conditions)
		}
		if len(sc.Features) > 0 && sc.Action == rollout.ActionUpdate {
			fmt.Fprintf(&b, "      new versions of the features that use it: %s\n", strings.Join(sc.Features, ", "))
		}
	}
	fmt.Fprintf(&b, "Total churn: %s over %d change(s) (the sum of each feature's churn).\n", pct(p.TotalChurn), p.Changed)
	if len(p.Unlisted) > 0 {
		fmt.Fprintf(&b, "Left alone (not in the document): %s\n", strings.Join(p.Unlisted, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func pct(f float64) string { return fmt.Sprintf("%.4f %%", 100*f) }

func orNobody(bucket string) string {
	if bucket == "" {
		return "(none)"
	}
	return bucket
}

const applySynopsis = `usage: rollout apply (-f FILE | PLAN) --server URL [--env E] [--max-churn F] [--max-total-churn F] [--comment C]

Applies the document FILE (planned first, and the plan printed) or the plan
PLAN saved by 'rollout plan --out': every change as one batch of versions,
each feature checked against the version the plan read, or nothing at all
(a feature changed since the plan refuses the apply, 412). The guards
refuse the whole apply when one feature would move more than --max-churn of
its users, or all of them more than --max-total-churn (the sum of the
features' churns). The versions carry --comment and the token's name. A
retry of the same apply (same plan, guards and comment) within 24 hours
applies nothing twice: it carries an Idempotency-Key made from them.
`

func runApply(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	server, token, env := clientFlags(fs, getenv)
	file := fs.String("f", "", "the document: a YAML or JSON file (or give a saved plan as the argument)")
	maxChurn := fs.Float64("max-churn", -1, "refuse if one feature would move more than this fraction of its users (0 to 1; default: no bound)")
	maxTotal := fs.Float64("max-total-churn", -1, "refuse if the features' churns sum to more than this (default: no bound)")
	comment := fs.String("comment", "", "why: stored with every version the apply makes")
	key := fs.String("idempotency-key", "", "the Idempotency-Key (default: one made from the plan, guards and comment)")
	rest, err := parseFlags(fs, applySynopsis, args, stdout)
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 1:
		return fmt.Errorf("apply takes one saved plan, got %q", rest)
	case len(rest) == 1 && *file != "":
		return errors.New("give the document with -f or a saved plan, not both")
	case len(rest) == 0 && *file == "":
		return errors.New("give the document with -f FILE, or a plan saved by 'rollout plan --out'")
	}
	c, err := newClient(*server, *token, *env, getenv)
	if err != nil {
		return err
	}
	var p rollout.DocumentPlan
	if *file != "" {
		doc, err := readDocument(*file)
		if err != nil {
			return err
		}
		if p, _, err = c.plan(ctx, doc); err != nil {
			return err
		}
	} else {
		data, err := os.ReadFile(rest[0])
		if err != nil {
			return err
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(&p); err != nil || p.Versions == nil || p.Document.Features == nil {
			return fmt.Errorf("%s is not a plan saved by 'rollout plan --out'", rest[0])
		}
	}
	if err := printPlan(stdout, p); err != nil {
		return err
	}
	if p.Changed == 0 {
		fmt.Fprintln(stdout, "Nothing to apply.")
		return nil
	}
	req := map[string]any{"document": p.Document, "versions": p.Versions, "segment_versions": p.SegmentVersions, "comment": *comment}
	if *maxChurn >= 0 {
		req["max_churn"] = *maxChurn
	}
	if *maxTotal >= 0 {
		req["max_total_churn"] = *maxTotal
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if *key == "" {
		sum := sha256.Sum256(body)
		*key = "rollout-apply-" + hex.EncodeToString(sum[:16])
	}
	raw, err := c.do(ctx, http.MethodPost, "/api/apply", body, "Idempotency-Key", *key)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	var applied rollout.DocumentPlan
	if err := json.Unmarshal(raw, &applied); err != nil {
		return fmt.Errorf("apply: the answer is not a plan: %w", err)
	}
	fmt.Fprintf(stdout, "Applied %d change(s) as one batch, total churn %s:\n", applied.Changed, pct(applied.TotalChurn))
	for _, ch := range applied.Changes {
		if ch.Action != rollout.ActionNone {
			fmt.Fprintf(stdout, "  %s: version %d\n", ch.Feature, ch.ToVersion)
		}
	}
	return nil
}
