package postgres

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// listener makes the connections Notifications listens on. Its listeners
// also end when the DB closes: close ends them and waits for them.
type listener struct {
	config *pgx.ConnConfig

	life      context.Context // done at close
	end       context.CancelFunc
	listeners sync.WaitGroup
}

func newListener(config *pgx.ConnConfig) *listener {
	l := &listener{config: config}
	l.life, l.end = context.WithCancel(context.Background())
	return l
}

// close ends every listener and waits until each has closed its channel.
func (l *listener) close() {
	l.end()
	l.listeners.Wait()
}

// notifications listens on a connection of its own for the revisions
// writers announce, and sends each on the returned channel until ctx is
// done or the DB closes, when it closes the channel. Sends never block: when the reader is
// behind, the channel holds only the highest revision not yet received.
//
// Each time the listener is in place, on the first connection and again
// after a lost connection is made anew (tried with growing pauses, up to
// 5 s), it also sends the current revision, so that the reader checks for
// changes it was not told of. Once that first value is received, every
// later commit is announced.
func (l *listener) notifications(ctx context.Context) <-chan int64 {
	ch := make(chan int64, 1)
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(l.life, cancel)
	l.listeners.Go(func() {
		defer cancel()
		defer stop()
		defer close(ch)
		const minPause, maxPause = 50 * time.Millisecond, 5 * time.Second
		pause := minPause
		for ctx.Err() == nil {
			if err := l.listen(ctx, ch, func() { pause = minPause }); err == nil || ctx.Err() != nil {
				return
			}
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return
			}
			pause = min(2*pause, maxPause)
		}
	})
	return ch
}

// listen connects, listens, sends the current revision and then each
// notified one on ch until the connection fails or ctx is done. connected
// is called once the listener is in place.
func (l *listener) listen(ctx context.Context, ch chan int64, connected func()) error {
	conn, err := pgx.ConnectConfig(ctx, l.config.Copy())
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return err
	}
	var rev int64
	if err := conn.QueryRow(ctx, `SELECT revision FROM revision WHERE id = 1`).Scan(&rev); err != nil {
		return err
	}
	connected()
	offer(ch, rev)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		rev, err := strconv.ParseInt(n.Payload, 10, 64)
		if err != nil {
			continue // not ours
		}
		offer(ch, rev)
	}
}

// offer sends rev on ch without blocking, replacing a value the reader has
// not taken yet (keeping the higher). Only one goroutine may offer on ch.
func offer(ch chan int64, rev int64) {
	select {
	case ch <- rev:
		return
	default:
	}
	select {
	case old := <-ch:
		rev = max(rev, old)
	default:
	}
	ch <- rev // the only sender just emptied the buffer, or the reader did
}
