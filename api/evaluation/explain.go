package evaluation

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout/feature"
)

// Answers that explain themselves: POST /evaluate with "explain":true adds
// to each answer why it is what it is (feature.Explanation: the
// prerequisites, each rule tried with each condition and why it held or
// not, the ring). An explanation costs several evaluations and allocates,
// so a request explains at most MaxExplainFeatures features, listed, and
// takes a slot of costly evaluations.

// MaxExplainFeatures bounds the features one request explains.
const MaxExplainFeatures = 20

type explainResult struct {
	*JSON
	Explain *feature.Explanation `json:"explain,omitempty"`
	Error   *errorDetail         `json:"error,omitempty"`
}

// explainMany answers POST /evaluate with "explain":true for keys (sorted,
// once each): each evaluation served and counted as without explain, and
// explained.
func (s *Server) explainMany(c echo.Context, snap *feature.Snapshot, req evaluateRequest, keys []string, ctx feature.Context) error {
	if req.Features == nil {
		return feature.Errorf(feature.EInvalid, "explain needs the features to explain: list at most %d in \"features\"", MaxExplainFeatures)
	}
	if len(keys) > MaxExplainFeatures {
		return feature.Errorf(feature.EInvalid, "explain explains at most %d features per request, got %d: list fewer, or leave out \"explain\"", MaxExplainFeatures, len(keys))
	}
	out := make(map[string]explainResult, len(keys))
	for _, key := range keys {
		o, err := snap.EvaluateOutcomeContext(key, req.User, ctx)
		if err != nil {
			out[key] = explainResult{Error: &errorDetail{Code: feature.ErrorCode(err), Message: feature.ErrorMessage(err)}}
			continue
		}
		answerOf(s.metrics, o).count.Inc()
		x, err := snap.Explain(key, req.User, ctx)
		if err != nil {
			out[key] = explainResult{Error: &errorDetail{Code: feature.ErrorCode(err), Message: feature.ErrorMessage(err)}}
			continue
		}
		ev := JSONOf(o.Evaluation(req.User))
		out[key] = explainResult{JSON: &ev, Explain: &x}
	}
	return c.JSON(http.StatusOK, map[string]any{"user": req.User, "results": out})
}
