package web_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/ramp"
)

// TestBrowserListKeepsUp: the list a product manager leaves open. Its
// count follows the filters ("5 of 55"); several tags at once keep the
// features with every one; names sort as people count (exp-9 before
// exp-49); "/" goes to the search; status chips are never cut, even
// "Ramping → 25 % in 51 min"; only "Turn off…" is red; the kill switch's
// confirmation opens above the table, never cut by it, at 1280 and 390
// px; and a change made elsewhere changes the row's values, not a mark
// alone.
func TestBrowserListKeepsUp(t *testing.T) {
	clock := &testClock{now: time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC)}
	a := newLiveApp(t, clock)
	seedList(t, a, clock)
	ctx := context.Background()
	for _, key := range []string{"exp-100", "exp-49", "exp-9"} {
		if _, err := a.svc.Create(ctx, feature.Feature{Key: key, Salt: key, Enabled: true, Buckets: []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 0}}, Tags: []string{"exp"}}, rollout.ChangeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.svc.CreateRamp(ctx, "exp-49", ramp.Spec{Bucket: "on", Shares: []float64{0.25, 0.5}, Every: time.Hour, Start: clock.Now().Add(51 * time.Minute)}, "dana"); err != nil {
		t.Fatal(err)
	}
	b := startBrowserOn(t, a)
	b.do(chromedp.Navigate(b.base+"/ui/"), waitFor(`body[data-live="open"]`))

	// The count follows the filters.
	if got := b.text("#feature-count"); got != "53" {
		t.Errorf("the count = %q, want 53", got)
	}
	b.do(fill("#filter", "pay-"))
	if got := b.text("#feature-count"); got != "5 of 53" {
		t.Errorf("the count after typing pay- = %q, want 5 of 53", got)
	}
	evaluate[bool](b, `(q => { q.value = ''; q.dispatchEvent(new Event('input')); return true })(document.getElementById('filter'))`)

	// Several tags: every one of them.
	pick := func(tag string) {
		t.Helper()
		b.do(openAt(fmt.Sprintf(`#filter-tags input[value=%q]`, tag)), chromedp.Click(chromedp.CSS(fmt.Sprintf(`#filter-tags input[value=%q]`, tag))))
	}
	pick("team-b")
	pick("q4")
	if rows := b.visibleRows(); len(rows) != 22 {
		t.Errorf("team-b and q4 show %d rows, want the 22 of team-b", len(rows))
	}
	if got, want := b.text("#feature-count"), "22 of 53"; got != want {
		t.Errorf("the count = %q, want %q", got, want)
	}
	if got := b.text("#filter-tags summary"); got != "q4 + team-b" {
		t.Errorf("the tag filter says %q, want q4 + team-b", got)
	}
	if got := evaluate[string](b, `location.search`); got != "?tag=q4&tag=team-b" {
		t.Errorf("the URL's query = %q", got)
	}
	pick("payments")
	if rows := b.visibleRows(); len(rows) != 0 {
		t.Errorf("team-b, q4 and payments show %v, want none", rows)
	}
	// The address keeps them: the server picks the same.
	b.do(chromedp.Navigate(b.base+"/ui/?tag=q4&tag=team-b&sort=name"), waitFor("#features"))
	if rows := b.visibleRows(); len(rows) != 22 || rows[0] != "feat-01" {
		t.Errorf("?tag=q4&tag=team-b shows %d rows from %v, want the 22 of team-b", len(rows), rows[:min(1, len(rows))])
	}

	// Names as people count.
	b.do(chromedp.Navigate(b.base+"/ui/?tag=exp&sort=name"), waitFor(`body[data-live="open"]`))
	if rows := b.visibleRows(); !slices.Equal(rows, []string{"exp-9", "exp-49", "exp-100"}) {
		t.Errorf("by name: %v, want exp-9, exp-49, exp-100", rows)
	}
	b.do(chromedp.Navigate(b.base+"/ui/?sort=name"), waitFor(`body[data-live="open"]`))
	if rows := b.visibleRows(); !slices.Equal(rows[:3], []string{"exp-9", "exp-49", "exp-100"}) {
		t.Errorf("by name, the server's order: %v, want exp-9, exp-49, exp-100 first", rows[:3])
	}

	// "/" goes to the search; typed into a field it is a slash.
	b.do(chromedp.KeyEvent("/"))
	if got := evaluate[string](b, `document.activeElement.id + '=' + document.activeElement.value`); got != "filter=" {
		t.Errorf("after / the focus is on %q, want the empty search", got)
	}
	b.do(chromedp.KeyEvent("exp/"))
	if got := evaluate[string](b, `document.getElementById('filter').value`); got != "exp/" {
		t.Errorf("typing exp/ in the search gives %q", got)
	}
	evaluate[bool](b, `(q => { q.value = ''; q.dispatchEvent(new Event('input')); q.blur(); return true })(document.getElementById('filter'))`)

	// Chips never cut; only "Turn off…" is red.
	if got := b.text(`tr[data-key="exp-49"] .chip`); got != "Ramping → 25 % in 51 min" {
		t.Errorf("exp-49's chip = %q", got)
	}
	for _, width := range []int64{1280, 390} {
		b.do(chromedp.EmulateViewport(width, 900))
		if cut := evaluate[[]string](b, `[...document.querySelectorAll('#features tr.feature-row:not([hidden]) .chip')].filter(c => {
			const cell = c.closest('td').getBoundingClientRect(); const r = c.getBoundingClientRect();
			return c.scrollWidth > c.clientWidth + 1 || r.right > cell.right + 1 || r.left < cell.left - 1 || c.closest('td').scrollWidth > c.closest('td').clientWidth + 1;
		}).map(c => c.closest('tr').dataset.key + ': ' + c.textContent)`); len(cut) > 0 {
			t.Errorf("at %d px these chips are cut: %q", width, cut)
		}
	}
	b.do(chromedp.EmulateViewport(1280, 900))
	colours := evaluate[map[string]string](b, `Object.fromEntries([...document.querySelectorAll('form.list-toggle button[type=submit]')].map(b => [b.firstChild.textContent.trim(), getComputedStyle(b).backgroundColor]))`)
	red := evaluate[string](b, `getComputedStyle(document.querySelector('tr[data-key="feat-00"] form.list-toggle button')).backgroundColor`)
	if colours["Turn off…"] != red || colours["Turn on…"] == red || len(colours) != 2 {
		t.Errorf("kill switch buttons' colours %v: want Turn off… red (%s), Turn on… not", colours, red)
	}

	// The confirmation is never cut by the table: on the last row too.
	for _, width := range []int64{1280, 390} {
		b.do(chromedp.EmulateViewport(width, 900))
		rows := b.visibleRows()
		last := rows[len(rows)-1]
		toggle := fmt.Sprintf(`form.list-toggle[data-key=%q] `, last)
		b.do(chromedp.ScrollIntoView(chromedp.CSS(toggle+"button[type=submit]")), chromedp.Click(chromedp.CSS(toggle+"button[type=submit]")), waitFor(toggle+".preview .apply"))
		type seen struct {
			Inside, OnTop bool
		}
		got := evaluate[seen](b, `(() => {
			const d = document.querySelector('`+strings.TrimSpace(toggle)+` dialog');
			const r = d.getBoundingClientRect();
			const apply = d.querySelector('.apply').getBoundingClientRect();
			return {inside: d.open && r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth,
				onTop: document.elementFromPoint(apply.left + apply.width / 2, apply.top + apply.height / 2) === d.querySelector('.apply')};
		})()`)
		if !got.Inside || !got.OnTop {
			t.Errorf("at %d px %s's confirmation: inside the window %v, its Apply on top %v", width, last, got.Inside, got.OnTop)
		}
		if width == 390 {
			b.screenshot("list-confirm-narrow", 390)
		} else {
			b.screenshot("list-confirm-wide", 1280)
		}
		b.do(chromedp.Click(chromedp.CSS(toggle + ".preview .cancel")))
		if open := evaluate[bool](b, `document.querySelector('`+strings.TrimSpace(toggle)+` dialog').open`); open {
			t.Errorf("at %d px Cancel leaves the confirmation open", width)
		}
	}
	b.do(chromedp.EmulateViewport(1280, 900))

	// Live: a feature turned off elsewhere reads Off, with its shares and
	// kill switch; a new feature joins the list.
	b.do(chromedp.Navigate(b.base+"/ui/"), waitFor(`body[data-live="open"]`))
	if got := b.text(`tr[data-key="feat-00"] .chip`); got != "Split" {
		t.Fatalf("feat-00's chip = %q before the change", got)
	}
	b.send("PATCH", "/api/features/feat-00", map[string]any{"enabled": false}, 200)
	b.do(waitFor(`tr[data-key="feat-00"].live-changed`))
	row := `tr[data-key="feat-00"] `
	if got := b.text(row + ".chip"); got != "Off" {
		t.Errorf("feat-00 turned off elsewhere: its chip says %q, want Off", got)
	}
	if got := b.text(row + ".shares-cell"); got != "No bucket served" {
		t.Errorf("feat-00 turned off elsewhere: its shares say %q", got)
	}
	if got := b.text(row + "form.list-toggle button[type=submit]"); !strings.HasPrefix(got, "Turn on…") {
		t.Errorf("feat-00 turned off elsewhere: its kill switch says %q", got)
	}
	b.send("POST", "/api/features", map[string]any{"key": "brand-new", "buckets": []map[string]any{{"name": "on", "replicas": 10}}}, 201)
	b.do(waitFor(`tr[data-key="brand-new"]`))
	if got := b.text("#feature-count"); got != "54" {
		t.Errorf("the count after a feature was created elsewhere = %q, want 54", got)
	}
	// The kill switch of a row that came live works: its preview opens.
	b.do(chromedp.Click(chromedp.CSS(row+"form.list-toggle button[type=submit]")), waitFor(row+".preview .apply"))
	if got := b.text(row + ".preview .apply"); got != "Turn it on" {
		t.Errorf("the live row's kill switch offers %q, want Turn it on", got)
	}
	b.screenshots("list-keeps-up")
	b.checkConsole()
}
