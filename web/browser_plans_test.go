package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/plan"
	"github.com/rollout/rollout/rollout/stats"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/web"
)

// red is the stylesheet's --bad colour in the light theme: what the page
// says in red is in it.
const red = "rgb(185, 28, 28)"

type apiBuckets struct {
	Version int                `json:"version"`
	Shares  map[string]float64 `json:"shares"`
	Buckets []struct {
		Name     string `json:"name"`
		Replicas int    `json:"replicas"`
	} `json:"buckets"`
}

// TestBrowserPlanChoice: a product manager creates exp with four buckets
// at 25 % each, typed as percentages (the preview says what was asked and
// what each bucket gets exactly), then asks for 40 / 10 / 25 / 25. Two
// buckets change at once, so the preview offers both plans: "rebalance
// exactly", whose switches between existing variants (this change is
// chosen so that the exact plan has some) are listed in red, and "only move
// users into or out of the changed buckets", under which C and D drift.
// Picking the second previews it, and Apply applies that plan's replicas,
// not the other's; the banner and the history lead with what range
// bucketing would have moved.
func TestBrowserPlanChoice(t *testing.T) {
	b := startBrowser(t)
	b.do(chromedp.Navigate(b.base+"/ui/"), waitFor("#create-form"))

	// Create: four rows of percentages; no replicas in sight.
	b.do(fill("#new-key", "exp"), chromedp.Click(chromedp.CSS("#add-row")), chromedp.Click(chromedp.CSS("#add-row")))
	for i, name := range []string{"A", "B", "C", "D"} {
		row := fmt.Sprintf("#bucket-rows .bucket-row:nth-of-type(%d) ", i+1)
		b.do(fill(row+"[name=bucket-name]", name), fill(row+"[name=bucket-share]", "25"))
	}
	if n := evaluate[int](b, `[...document.querySelectorAll('#create-form input[name=bucket-replicas]')].filter(e => e.checkVisibility()).length`); n != 0 {
		t.Errorf("%d replica fields show in the create form, want none outside Advanced", n)
	}
	b.do(chromedp.Click(chromedp.CSS("#create-form button[type=submit]")), waitFor("#create-form .preview .apply"))
	asked := evaluate[map[string]string](b, `Object.fromEntries([...document.querySelectorAll('#create-form .preview .plan-asked li')].map(li => [li.dataset.bucket, li.textContent]))`)
	b.screenshot("create-percent-wide", 1280)
	b.screenshot("create-percent-narrow", 390)
	b.do(chromedp.Click(chromedp.CSS("#create-form .preview .apply")), waitFor(`#banner[data-version="1"]`))
	var created apiBuckets
	b.api("/api/features/exp", &created)
	for _, n := range []string{"A", "B", "C", "D"} {
		s := created.Shares[n]
		if math.Abs(s-0.25) > plan.FineTolerance {
			t.Errorf("share of %s = %v, want 25 %% within 0.05 points", n, s)
		}
		if want := fmt.Sprintf("%s: you asked 25%% (1/4): %.2f%% (exact: %.5f%%)", n, 100*s, 100*s); asked[n] != want {
			t.Errorf("create preview of %s = %q, want %q", n, asked[n], want)
		}
	}

	// 40 / 10 / 25 / 25: A grows, B shrinks, C and D are asked to stay.
	targets := map[string]float64{"A": 0.4, "B": 0.1, "C": 0.25, "D": 0.25}
	p, _, err := b.app.svc.Plan("exp", targets, plan.Options{Mode: plan.ModeAuto})
	if err != nil {
		t.Fatal(err)
	}
	exact, okE := p.Options[plan.ModeExact]
	nested, okN := p.Options[plan.ModeNested]
	if !okE || !okN || len(exact.CrossMoves) == 0 || exact.CrossChurn <= 0 {
		t.Fatalf("the plan of %v offers %v, with exact cross-moves %v: this test needs both plans and cross-moves in the exact one", targets, p.Options, exact.CrossMoves)
	}
	form := `form[data-kind=targets] `
	b.do(unfold("targets"))
	for n, v := range map[string]string{"A": "40", "B": "10", "C": "25", "D": "25"} {
		b.do(fill(form+fmt.Sprintf(`input[name=target][data-bucket=%q]`, n), v))
	}
	b.do(chromedp.Click(chromedp.CSS(form+`button[type=submit]`)), waitFor(form+".preview .plan-choice"), waitFor(form+`.preview[data-mode="exact"] .apply`))
	if !evaluate[bool](b, `document.getElementById('targets-plan-exact').checked && !document.getElementById('targets-plan-nested').checked`) {
		t.Error("the exact plan, which the planner answers, is not the one picked")
	}
	var moves []string
	for _, m := range exact.CrossMoves {
		moves = append(moves, m.From+"→"+m.To)
	}
	wantCross := fmt.Sprintf("%.2f%% switch between existing variants %s: this affects a running experiment.", 100*exact.CrossChurn, strings.Join(moves, ", "))
	if got := b.text(form + ".preview .plan-cross"); got != wantCross {
		t.Errorf("cross-moves = %q, want %q", got, wantCross)
	}
	if got := b.text(form + `.preview .plan-option[data-mode="exact"] .option-cross`); got != wantCross {
		t.Errorf("the exact option's cross-moves = %q, want %q", got, wantCross)
	}
	colours := evaluate[[]string](b, `[...document.querySelectorAll('form[data-kind=targets] .preview .plan-cross, form[data-kind=targets] .preview .option-cross, form[data-kind=targets] .preview table.moves tr.cross td')].map(e => getComputedStyle(e).color)`)
	if len(colours) < 3 {
		t.Errorf("%d cross-move elements (line, option, rows of the moves table), want at least 3", len(colours))
	}
	for _, c := range colours {
		if c != red {
			t.Errorf("a cross-move is in %s, want red %s", c, red)
		}
	}
	if c := evaluate[string](b, `getComputedStyle(document.querySelector('form[data-kind=targets] .preview .plan-churn')).color`); c == red {
		t.Error("the plan's churn is red too: red must single out the cross-moves")
	}
	drift := b.text(form + `.preview .plan-option[data-mode="nested"] .drift`)
	for _, n := range []string{"C", "D"} {
		if want := fmt.Sprintf("%s %.2f%% (asked 25.00%%)", n, 100*nested.SharesAfter[n]); !strings.Contains(drift, want) {
			t.Errorf("the nested option's drift %q lacks %q", drift, want)
		}
	}
	if got := b.text(form + `.preview .plan-option[data-mode="nested"] label`); got != "Only move users into or out of the changed buckets" {
		t.Errorf("nested option = %q", got)
	}
	if got := b.text(form + `.preview .plan-option[data-mode="exact"] label`); got != "Rebalance exactly" {
		t.Errorf("exact option = %q", got)
	}
	if got := b.text(form + ".preview .range"); !strings.HasPrefix(got, "Range bucketing, as LaunchDarkly, Unleash, GrowthBook, Flipt and flagd split users, would move ") {
		t.Errorf("range baseline = %q", got)
	}
	b.screenshot("plan-choice-exact-wide", 1280)
	b.screenshot("plan-choice-exact-narrow", 390)

	// Pick the nested plan: its preview replaces the exact one's.
	b.do(chromedp.Click(chromedp.CSS("#targets-plan-nested")), waitFor(form+`.preview[data-mode="nested"] .apply`))
	if got, want := b.text(form+".preview .apply"), "Apply: only move users into or out of the changed buckets"; got != want {
		t.Errorf("apply button = %q, want %q", got, want)
	}
	if got := b.text(form + ".preview .plan-churn"); !strings.HasPrefix(got, fmt.Sprintf("Moves %.2f%% of users", 100*nested.Churn)) {
		t.Errorf("nested plan's churn = %q, want %.2f%%", got, 100*nested.Churn)
	}
	if got := b.text(form + ".preview .outcome"); !strings.HasPrefix(got, fmt.Sprintf("%.2f%% of users would move", 100*nested.Churn)) {
		t.Errorf("nested plan's dry run = %q, want %.2f%%", got, 100*nested.Churn)
	}
	if !evaluate[bool](b, `document.getElementById('targets-plan-nested').checked && document.activeElement.id === 'targets-plan-nested'`) {
		t.Error("after picking the nested plan it is not checked and focused")
	}
	b.screenshot("plan-choice-nested-wide", 1280)
	b.screenshot("plan-choice-nested-narrow", 390)
	b.do(chromedp.Click(chromedp.CSS(form+".preview .apply")), waitFor(`#banner[data-version="2"]`))

	var after apiBuckets
	b.api("/api/features/exp", &after)
	got := map[string]int{}
	for _, bk := range after.Buckets {
		got[bk.Name] = bk.Replicas
	}
	for _, bk := range nested.Buckets {
		if got[bk.Name] != bk.Replicas {
			t.Errorf("applied %s with %d replicas, the nested plan has %d (the exact %v)", bk.Name, got[bk.Name], bk.Replicas, exact.Buckets)
		}
	}
	v, err := b.app.svc.Version(context.Background(), "exp", 2)
	if err != nil {
		t.Fatal(err)
	}
	wantRange := fmt.Sprintf("Range bucketing, as LaunchDarkly, Unleash, GrowthBook, Flipt and flagd split users, would have moved %.2f%%; rollout moved %.2f%%.", 100*v.Report.RangeChurn, 100*v.Report.Churn)
	if got := b.text("#banner .range"); got != wantRange {
		t.Errorf("banner's range baseline = %q, want %q", got, wantRange)
	}
	if got := b.text(`#history li[data-version="2"] .range-line`); got != wantRange {
		t.Errorf("history's range baseline = %q, want %q", got, wantRange)
	}
	b.screenshot("plan-applied-wide", 1280)
	b.screenshot("plan-applied-narrow", 390)

	// 3 × 33.33 % (and D at 0 %) is equal thirds: the total says the
	// rounding is taken as 100 %, and the plan's targets are thirds.
	b.do(unfold("targets"))
	for n, v := range map[string]string{"A": "33.33", "B": "33.33", "C": "33.33", "D": "0"} {
		b.do(fill(form+fmt.Sprintf(`input[name=target][data-bucket=%q]`, n), v))
	}
	if got := b.text(form + ".target-sum"); got != "Total: 99.99% — rounded, taken as 100%" {
		t.Errorf("total of 3 × 33.33 = %q", got)
	}
	b.do(chromedp.Click(chromedp.CSS(form+`button[type=submit]`)), waitFor(form+".preview .apply"))
	third := 1.0 / 3
	thirds, _, err := b.app.svc.Plan("exp", map[string]float64{"A": third, "B": third, "C": third, "D": 0}, plan.Options{Mode: plan.ModeAuto})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"A", "B", "C"} {
		s := thirds.SharesAfter[n]
		if want := fmt.Sprintf("%s: you asked 33.33%% (1/3): %.2f%% (exact: %.5f%%)", n, 100*s, 100*s); b.text(form+fmt.Sprintf(`.preview .plan-asked li[data-bucket=%q]`, n)) != want {
			t.Errorf("thirds: %q, want %q", b.text(form+fmt.Sprintf(`.preview .plan-asked li[data-bucket=%q]`, n)), want)
		}
		if math.Abs(s-third) > plan.FineTolerance {
			t.Errorf("the plan of thirds gives %s %v", n, s)
		}
	}
	wantD := "removed"
	for _, bk := range thirds.Buckets {
		if bk.Name == "D" {
			wantD = fmt.Sprintf("%d", bk.Replicas)
			if bk.Replicas == 0 {
				wantD = "0 (0%, kept)"
			}
		}
	}
	t.Logf("thirds and D at 0 %%: mode %s, options %d, D %s", thirds.Mode, len(thirds.Options), wantD)
	if got := b.text(form + `.preview tr[data-bucket="D"] td.replicas`); got != wantD {
		t.Errorf("D at 0 %% = %q, want the plan's %q", got, wantD)
	}
	b.checkConsole()
}

// call sends a JSON request with a token and decodes the answer into out.
func call(t *testing.T, method, url, token string, body, out any) {
	t.Helper()
	var r *bytes.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(data)
	} else {
		r = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		var e map[string]any
		json.NewDecoder(res.Body).Decode(&e)
		t.Fatalf("%s %s = %d: %v", method, url, res.StatusCode, e)
	}
	if out != nil {
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBrowserSRM: an app posts its exposure counts with an sdk token.
// Counts that follow version 1's exact shares pass the sample-ratio check on
// the feature's page; counts skewed by 3 % at version 2 trip it: the page
// warns in red, on the version's row and in its history, and version 1
// stays fine. The p-values are the API's.
func TestBrowserSRM(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tokens, err := auth.NewTokens(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := rollout.NewService(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, admin, err := tokens.Create(ctx, "ann", auth.RoleAdmin, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, sdk, err := tokens.Create(ctx, "app", auth.RoleSDK, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	access := api.NewAuth(tokens, nil)
	e := api.New(svc, api.Options{Auth: access, Plans: testPlanLimits, Routes: web.Routes(svc, web.Options{Sessions: access})})
	b := startBrowserOn(t, &app{e: e, svc: svc, db: db})

	p, err := plan.New(map[string]float64{"control": 0.5, "treatment": 0.5}, plan.Options{Mode: plan.ModeAuto, Order: []string{"control", "treatment"}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := svc.Create(ctx, feature.Feature{Key: "signup", Enabled: true, Salt: "signup", Buckets: p.Buckets}, rollout.ChangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := f.Feature.ID
	batch := 0
	post := func(version int, counts map[string]int64) {
		t.Helper()
		batch++
		var list []map[string]any
		for bucket, n := range counts {
			list = append(list, map[string]any{"feature": "signup", "feature_id": id, "version": version, "bucket": bucket, "count": n,
				"users_sketch": usersSketch(fmt.Sprintf("v%d-%s-", version, bucket), n)})
		}
		var ans struct {
			Counted int `json:"counted"`
		}
		call(t, http.MethodPost, b.base+"/api/exposures", sdk, map[string]any{"batch": fmt.Sprintf("srm-batch-%04d", batch), "exposures": list}, &ans)
		if ans.Counted != len(list) {
			t.Fatalf("the server counted %d of %d counts", ans.Counted, len(list))
		}
	}
	shares, _ := svc.Snapshot().Shares("signup")
	const n = 200_000
	control := int64(math.Round(shares["control"] * n))
	post(1, map[string]int64{"control": control, "treatment": n - control})

	b.do(chromedp.Navigate(b.base+"/ui/login"), waitFor("#token"))
	b.do(fill("#token", admin), chromedp.Submit(chromedp.CSS("#token")), waitFor("#who"))
	b.do(chromedp.Navigate(b.base+"/ui/features/signup"), waitFor("#srm"))
	type report struct {
		VersionSRM []stats.SRM `json:"version_srm"`
	}
	var rep report
	call(t, http.MethodGet, b.base+"/api/features/signup/exposures", admin, nil, &rep)
	if len(rep.VersionSRM) != 1 || rep.VersionSRM[0].Mismatch {
		t.Fatalf("the API's checks of exact counts: %+v", rep.VersionSRM)
	}
	if n := evaluate[int](b, `document.querySelectorAll('.srm-warning, #srm tr.mismatch, .srm-line.srm-bad, p.srm.error').length`); n != 0 {
		t.Errorf("counts that follow the shares show %d warnings", n)
	}
	if got, want := b.text(`#srm tr[data-version="1"]`), fmt.Sprintf("v1 %s %.2f (1) %.4f Matches the shares", thousands(rep.VersionSRM[0].Total), rep.VersionSRM[0].ChiSquare, rep.VersionSRM[0].PValue); got != want {
		t.Errorf("version 1's check = %q, want %q", got, want)
	}
	b.screenshot("srm-fine-wide", 1280)
	b.screenshot("srm-fine-narrow", 390)

	// Version 2: 40 / 60; the app logs 15 % more treatment users than it
	// serves (a skew of a few percent hides in the estimates' error at
	// this many users).
	q, _, err := svc.Plan("signup", map[string]float64{"control": 0.4, "treatment": 0.6}, plan.Options{Mode: plan.ModeAuto})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Change(ctx, "signup", change.SetBuckets(q.Buckets), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	shares, _ = svc.Snapshot().Shares("signup")
	control = int64(math.Round(shares["control"] * n))
	post(2, map[string]int64{"control": control, "treatment": (n - control) * 115 / 100})
	b.do(chromedp.Reload(), waitFor(`#srm tr[data-version="2"]`))
	call(t, http.MethodGet, b.base+"/api/features/signup/exposures", admin, nil, &rep)
	if len(rep.VersionSRM) != 2 || !rep.VersionSRM[0].Mismatch || rep.VersionSRM[1].Mismatch {
		t.Fatalf("the API's checks: %+v; want version 2 mismatched, version 1 not", rep.VersionSRM)
	}
	if got := b.text(".srm-warning"); got != "Sample-ratio mismatch at 1 version: do not read the experiment from these counts until you know why they are off." {
		t.Errorf("warning = %q", got)
	}
	if got := b.text(`#srm tr[data-version="2"] .verdict`); got != "Mismatch (p < 0.001): check how apps log exposures" {
		t.Errorf("version 2's verdict = %q", got)
	}
	if got := b.text(`#srm tr[data-version="2"] .pvalue`); got != "< 0.0001" || rep.VersionSRM[0].PValue >= 0.0001 {
		t.Errorf("version 2's p-value shows %q; the API's is %v", got, rep.VersionSRM[0].PValue)
	}
	if got := b.text(`#srm tr[data-version="1"] .verdict`); got != "Matches the shares" {
		t.Errorf("version 1's verdict after version 2 = %q", got)
	}
	if got := b.text(`#history li[data-version="2"] .srm-line`); !strings.HasPrefix(got, "Sample-ratio mismatch in the ≈ "+thousands(rep.VersionSRM[0].Total)+" distinct users counted at this version (p < 0.0001, under 0.001)") {
		t.Errorf("history of version 2 = %q", got)
	}
	if got := b.text(`#history li[data-version="1"] .srm-line`); !strings.HasSuffix(got, "the counts match the shares.") {
		t.Errorf("history of version 1 = %q", got)
	}
	for _, sel := range []string{".srm-warning", `#srm tr[data-version="2"] .verdict`, `#history li[data-version="2"] .srm-line`, "p.srm.error"} {
		if c := evaluate[string](b, `getComputedStyle(document.querySelector('`+sel+`')).color`); c != red {
			t.Errorf("%s is in %s, want red", sel, c)
		}
	}
	b.screenshot("srm-mismatch-wide", 1280)
	b.screenshot("srm-mismatch-narrow", 390)
	b.checkConsole()
}

// thousands formats n with commas, as the page does.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
