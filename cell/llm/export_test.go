package llm

// ParseRetryAfter exposes parseRetryAfter to the tests of package llm_test.
var ParseRetryAfter = parseRetryAfter
