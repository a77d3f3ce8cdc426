package provider

// JSONInt is jsonInt, for its table test.
var JSONInt = jsonInt
