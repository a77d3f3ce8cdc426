// Package webhook is the webhooks admins register (Hook) and their
// delivery. Each webhook receives the audit trail (package audit): Hooks
// registers, lists, removes and resumes them over a Store, and a Worker
// claims due webhooks from an Outbox with a lease, POSTs each one's next
// event signed with its secret (Signature, Body), and records the attempt,
// moving the webhook's cursor on success, backing off on failure (Backoff)
// and pausing it after MaxFailures failures in a row. It reads events
// after they commit, so a change never waits for a delivery and nothing
// is sent of a change that did not commit.
//
// Delivery is at least once: a worker that sends an event but cannot
// record it before its lease runs out (a crash, a database that stops
// answering) lets another worker send it again. Receivers tell repeats by
// the event's "id".
//
// The package's files: hook.go (Hook, its validation, payload and
// signature, the Store and Outbox it is kept in, and Hooks, what admins
// do) and webhook.go (the delivery Worker, over HTTP). Package store keeps
// webhooks; packages api and web serve Hooks.
package webhook

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rollout/rollout/rollout/audit"
)

// Defaults of Options.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultConcurrency = 4
	DefaultInterval    = time.Second
	// MaxResponseBytes is how much of an endpoint's answer is read; the
	// delivery log keeps the first 200 bytes of a failure's.
	MaxResponseBytes = 4 << 10
)

// Options configure a Worker.
type Options struct {
	// Client sends the deliveries; nil: one that follows no redirects.
	// Its Timeout is not used: Timeout bounds each delivery.
	Client *http.Client
	// Timeout bounds each delivery, connection to answer; 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// Concurrency is how many webhooks this worker delivers to at once;
	// 0 means DefaultConcurrency.
	Concurrency int
	// Lease is how long a claimed webhook is this worker's; 0 means
	// three timeouts. It must outlast a delivery.
	Lease time.Duration
	// Owner names this worker in the store's leases; "": a random name.
	Owner string
	// Clock is the time of claims, backoff and the log; nil: time.Now.
	Clock func() time.Time
}

// Worker delivers events to webhooks. It is safe for concurrent use, but
// one per process is what is meant.
type Worker struct {
	store   Outbox
	client  *http.Client
	timeout time.Duration
	conc    int
	lease   time.Duration
	owner   string
	now     func() time.Time
}

// New returns a worker on store.
func New(store Outbox, opts Options) *Worker {
	w := &Worker{store: store, client: opts.Client, timeout: opts.Timeout, conc: opts.Concurrency, lease: opts.Lease,
		owner: opts.Owner, now: opts.Clock}
	if w.client == nil {
		w.client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if w.timeout <= 0 {
		w.timeout = DefaultTimeout
	}
	if w.conc <= 0 {
		w.conc = DefaultConcurrency
	}
	if w.lease <= 0 {
		w.lease = 3 * w.timeout
	}
	if w.owner == "" {
		b := make([]byte, 8)
		rand.Read(b)
		w.owner = "worker-" + hex.EncodeToString(b)
	}
	if w.now == nil {
		w.now = time.Now
	}
	return w
}

// RunOnce claims the webhooks that are due, at most Concurrency, delivers
// each its next event at once, records the attempts, and returns how many
// it made. Errors are the store's; a failed delivery is no error (it is in
// the log).
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	claims, err := w.store.ClaimWebhooks(ctx, w.owner, w.now(), w.lease, w.conc)
	if err != nil || len(claims) == 0 {
		return 0, err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, c := range claims {
		wg.Go(func() {
			if err := w.handle(ctx, c); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return len(claims), errors.Join(errs...)
}

// handle delivers a claim and records the attempt.
func (w *Worker) handle(ctx context.Context, c Claim) error {
	d := w.deliver(ctx, c.Hook, c.Event)
	if ctx.Err() != nil {
		return nil // shutting down: the lease runs out and another worker (or the next start) sends it
	}
	_, err := w.store.FinishWebhook(ctx, w.owner, c.Hook.ID, c.Hook.Outcome(c.Event, d, w.now()))
	return err
}

// Run delivers until ctx ends: it keeps up to Concurrency deliveries in
// flight, claiming more as soon as one ends and otherwise every interval
// (0: DefaultInterval), so that a webhook that hangs holds one slot and
// delays no other. report gets the store's errors. Run returns once every
// delivery it started has ended.
func (w *Worker) Run(ctx context.Context, interval time.Duration, report func(error)) {
	if interval <= 0 {
		interval = DefaultInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	inflight := map[string]bool{} // webhook IDs being delivered, touched by this goroutine only
	ended := make(chan string, w.conc)
	fail := func(err error) {
		if err != nil && ctx.Err() == nil && report != nil {
			report(fmt.Errorf("deliver webhooks: %w", err))
		}
	}
	for {
		if free := w.conc - len(inflight); free > 0 {
			claims, err := w.store.ClaimWebhooks(ctx, w.owner, w.now(), w.lease, free)
			fail(err)
			for _, c := range claims {
				if inflight[c.Hook.ID] { // cannot be: leased to us until it ends
					continue
				}
				inflight[c.Hook.ID] = true
				wg.Go(func() {
					fail(w.handle(ctx, c))
					ended <- c.Hook.ID
				})
			}
		}
		select {
		case <-ctx.Done():
			return
		case id := <-ended:
			delete(inflight, id)
		case <-t.C:
		}
	}
}

// deliver POSTs e to h and says how it went: for a failure, a reason in
// words of our own (Delivery.Error), which reaches the
// audit trail when it pauses the webhook, and what the endpoint answered
// or the connection's error (Detail), which only the admins' delivery log
// shows.
func (w *Worker) deliver(ctx context.Context, h Hook, e audit.Event) Delivery {
	start := w.now()
	d := Delivery{Time: start}
	body := Body(e)
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		// Without the URL, which may hold a secret.
		d.Error, d.Detail = "invalid URL", "the request could not be made"
		return d
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "rollout-webhook/1")
	req.Header.Set("X-Rollout-Signature", Signature(h.Secret, body))
	req.Header.Set("X-Rollout-Event", string(e.Kind))
	req.Header.Set("X-Rollout-Event-Id", strconv.FormatInt(e.ID, 10))
	req.Header.Set("X-Rollout-Webhook", h.ID)
	resp, err := w.client.Do(req)
	d.Duration = w.now().Sub(start).Milliseconds()
	if err != nil {
		// Without the URL, which may hold a secret.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		d.Error = failureReason(err)
		if d.Error == reasonTimeout {
			d.Detail = fmt.Sprintf("no answer within %v", w.timeout)
		} else {
			d.Detail = excerpt([]byte(err.Error()))
		}
		return d
	}
	defer resp.Body.Close()
	d.Status = resp.StatusCode
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// The status code alone: the reason phrase, like the body, is
		// the endpoint's to choose, and may echo its URL.
		d.Error = "HTTP " + strconv.Itoa(resp.StatusCode)
		d.Detail = excerpt(answer)
	}
	return d
}

// maxDetail is how much of an endpoint's answer, or of a connection's
// error, the delivery log keeps.
const maxDetail = 200

// excerpt is the first maxDetail bytes of b, as valid UTF-8.
func excerpt(b []byte) string {
	return string(bytes.ToValidUTF8(b[:min(len(b), maxDetail)], []byte("?")))
}

const reasonTimeout = "timeout"

// failureReason says why a request got no answer, in words of our own:
// a connection's error may carry what the endpoint sent (a malformed
// answer, a certificate's names), which must not reach the audit trail.
func failureReason(err error) string {
	var (
		dns      *net.DNSError
		certErr  *tls.CertificateVerificationError
		alert    tls.AlertError
		header   tls.RecordHeaderError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		netErr   net.Error
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return reasonTimeout
	case errors.As(err, &dns):
		return "DNS lookup failed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.As(err, &certErr), errors.As(err, &alert), errors.As(err, &header),
		errors.As(err, &unknown), errors.As(err, &hostname), errors.As(err, &invalid):
		return "TLS handshake failed"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed without an answer"
	}
	return "no valid answer"
}
