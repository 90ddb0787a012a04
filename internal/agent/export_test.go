package agent

// AppendIndented is appendIndented, for FuzzAppendIndented.
var AppendIndented = appendIndented
