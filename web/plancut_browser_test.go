package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/web"
)

// TestBrowserPlanCutShort: a plan whose search the server cut short says so
// in the preview, beside the plan it found, which can still be applied.
func TestBrowserPlanCutShort(t *testing.T) {
	a := newApp(t, 0)
	a.e = api.New(a.svc, api.Options{Plans: api.PlanLimits{Budget: 10, Timeout: time.Hour}, Routes: web.Routes(a.svc, web.Options{})}) // fine plans take few steps
	a.seed(t)
	b := startBrowserOn(t, a)
	b.do(chromedp.Navigate(b.base+"/ui/features/dark-mode"), waitFor("#feature-key"), unfold("targets"))

	form := `form[data-kind=targets] `
	b.do(fill(form+`input[name=target][data-bucket="on"]`, "10"), fill(form+`input[name=target][data-bucket="off"]`, "90"),
		chromedp.Click(chromedp.CSS(form+`button[type=submit]`)), waitFor(form+".preview .apply"))
	if got := b.text(form + ".preview .plan-cut"); !strings.Contains(got, "The planner stopped early (it used up its budget of steps): this is the best plan it found") {
		t.Errorf("cut plan's preview = %q, want it to say the planner stopped early", got)
	}
	b.confirmBig(form)
	b.do(chromedp.Click(chromedp.CSS(form+".preview .apply")), waitFor(`#banner[data-version="2"]`))
	b.checkConsole()
}
