package provider

// JSONInt is jsonInt, for its table test.
var JSONInt = jsonInt

// ContextOf is contextOf, for its table test.
var ContextOf = contextOf
