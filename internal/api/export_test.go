package api

// AppendIndented is appendIndented, for FuzzAppendIndented.
var AppendIndented = appendIndented
