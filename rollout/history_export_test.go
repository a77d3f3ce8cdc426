package rollout

// Hooks into history reads for the tests of package rollout_test.

// SetHistoryHook makes every history read call f while it holds its turn.
// Set it before any read starts.
func (s *Service) SetHistoryHook(f func()) { s.history.held = f }

// HistoryWaiting is how many history reads are waiting for their turn.
func (s *Service) HistoryWaiting() int64 { return s.history.waiting.Load() }

// HistoryPointsHashed is how many ring points user look-ups have hashed.
func (s *Service) HistoryPointsHashed() int64 { return s.history.points.Load() }

// HistorySlots is how many history reads may run at once.
func HistorySlots() int { return historySlots() }
