package exposure

// BatchResult is what rollout.Service.AddExposureBatch did with a batch.
type BatchResult struct {
	// Added is false when the batch added nothing: its ID had been
	// counted already, or every count was skipped.
	Added bool
	// Counted is how many of the batch's counts were added.
	Counted int
	// Skipped are the counts left out, by index.
	Skipped []Skipped
}

// Skipped is a count of a batch that was left out, and why: its feature
// no longer exists (deleted since the app's copy was made), or its
// version is missing from the feature's history. These are not errors: an
// app may well have counted a feature that was deleted since, and its
// batch must not be refused for it, again and again.
type Skipped struct {
	Index     int    `json:"index"`
	FeatureID string `json:"feature_id"`
	Reason    string `json:"reason"`
}
