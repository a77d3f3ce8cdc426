package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCrashKeepsAcknowledgedChanges runs the real binary, drives concurrent
// changes, kills it with SIGKILL at a random moment, restarts it, and checks
// that every change acknowledged with 2xx is there, nothing is half written
// and every history is contiguous. Several times over one database.
func TestCrashKeepsAcknowledgedChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts the binary several times")
	}
	db := filepath.Join(t.TempDir(), "rollout.db")
	const writers = 4
	rng := rand.New(rand.NewPCG(7, 11))
	// acked[feature][version] = the replicas of bucket A that version set.
	acked := make([]map[int]int, writers)
	for w := range acked {
		acked[w] = map[int]int{}
	}

	for round := range 5 {
		p := startBinary(t, nil, "--addr", "127.0.0.1:0", "--db", db)
		if round == 0 {
			for w := range writers {
				body := fmt.Sprintf(`{"key":"f%d","buckets":[{"name":"A","replicas":5},{"name":"B","replicas":5}]}`, w)
				if res := p.post(t, "/api/features", body); res.StatusCode != 201 {
					t.Fatalf("create f%d = %d", w, res.StatusCode)
				}
				acked[w][1] = 5
			}
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		stop := make(chan struct{})
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				client := &http.Client{Timeout: 5 * time.Second}
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					replicas := 1 + (round*1000+i)%999
					req, _ := http.NewRequest("PUT", fmt.Sprintf("%s/api/features/f%d/buckets/A", p.url, w),
						strings.NewReader(fmt.Sprintf(`{"replicas":%d}`, replicas)))
					res, err := client.Do(req)
					if err != nil {
						return // the server is gone
					}
					var body struct {
						Feature struct{ Version int }
					}
					err = json.NewDecoder(res.Body).Decode(&body)
					res.Body.Close()
					if res.StatusCode == 200 && err == nil {
						mu.Lock()
						acked[w][body.Feature.Version] = replicas
						mu.Unlock()
					}
				}
			}()
		}
		time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond)
		p.cmd.Process.Kill()
		<-p.exited
		close(stop)
		wg.Wait()

		total := 0
		for _, a := range acked {
			total += len(a)
		}
		t.Logf("round %d: killed the server; %d changes acknowledged so far", round, total)

		p = startBinary(t, nil, "--addr", "127.0.0.1:0", "--db", db)
		for w := range writers {
			checkHistory(t, p.url, fmt.Sprintf("f%d", w), acked[w], round)
		}
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// checkHistory checks a feature's history after a crash: contiguous, each
// version with its report, and every acknowledged version as acknowledged.
func checkHistory(t *testing.T, base, key string, acked map[int]int, round int) {
	t.Helper()
	type version struct {
		Version int
		Config  struct {
			Version int
			Buckets []struct {
				Name     string
				Replicas int
			}
		}
		Report struct {
			ToVersion int `json:"to_version"`
		}
	}
	var body struct{ Versions []version }
	for next := "/api/features/" + key + "/versions?limit=500"; next != ""; { // every page
		res, err := http.Get(base + next)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Versions []version
			Next     *string
		}
		err = json.NewDecoder(res.Body).Decode(&page)
		res.Body.Close()
		if err != nil {
			t.Fatalf("round %d: %s history: %v", round, key, err)
		}
		body.Versions = append(body.Versions, page.Versions...)
		next = ""
		if page.Next != nil {
			next = *page.Next
		}
	}
	stored := map[int]int{}
	for i, v := range body.Versions {
		if want := len(body.Versions) - i; v.Version != want || v.Config.Version != want || v.Report.ToVersion != want {
			t.Fatalf("round %d: %s versions[%d] = version %d (config %d, report %d), want %d: history not contiguous or half written",
				round, key, i, v.Version, v.Config.Version, v.Report.ToVersion, want)
		}
		for _, b := range v.Config.Buckets {
			if b.Name == "A" {
				stored[v.Version] = b.Replicas
			}
		}
	}
	for version, replicas := range acked {
		got, ok := stored[version]
		if !ok {
			t.Errorf("round %d: %s version %d was acknowledged but is lost", round, key, version)
		} else if got != replicas {
			t.Errorf("round %d: %s version %d has A×%d, acknowledged A×%d", round, key, version, got, replicas)
		}
	}
	if len(body.Versions) < len(acked) {
		t.Errorf("round %d: %s has %d versions, fewer than the %d acknowledged", round, key, len(body.Versions), len(acked))
	}
}
