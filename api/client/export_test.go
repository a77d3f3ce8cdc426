package client

// RetryDelay is retryDelay, for tests of its bounds.
var RetryDelay = retryDelay
