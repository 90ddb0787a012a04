package labtest

import (
	"regexp"
	"strings"
)

// fixWord is a word, a flag or an example command ("like: vip claim
// 192.0.2.10") that tells the user what to do.
var fixWord = regexp.MustCompile(`\b(give|run|use|start|check|name|drop|ask)\b|--[a-z]|like: vip `)

// twoSentences is a sentence's end followed by another's start.
var twoSentences = regexp.MustCompile(`[a-z]\. [A-Z]`)

// CheckMessage reports what is wrong with stderr as the message of a
// failed vip command, or "" when nothing is: each line is vip's ("vip: "),
// and the last, the error, is one sentence that names the fix
// (CheckSentence).
func CheckMessage(stderr string) string {
	if !strings.HasSuffix(stderr, "\n") {
		return "does not end with a newline"
	}
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	for _, l := range lines {
		if !strings.HasPrefix(l, "vip: ") {
			return "has a line that does not start with \"vip: \": the error is more than one line"
		}
	}
	return CheckSentence(lines[len(lines)-1])
}

// CheckLastLine is CheckMessage for output where vip's error is the last
// line after others (a daemon's logs, a report on standard output).
func CheckLastLine(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "vip: ") {
		return "does not end with vip's error (a line that starts with \"vip: \")"
	}
	return CheckSentence(last)
}

// CheckSentence reports what is wrong with line, "vip: " and an error, as
// one: it must be one sentence, without a closing period, that names the
// fix (give, run, use, start, check, name, drop, ask, a flag or an
// example command).
func CheckSentence(line string) string {
	msg := strings.TrimPrefix(line, "vip: ")
	switch {
	case strings.HasSuffix(msg, "."):
		return "ends with a period"
	case twoSentences.MatchString(msg):
		return "is more than one sentence"
	case !fixWord.MatchString(msg):
		return "names no fix (give, run, use, start, check, name, drop, ask, a flag or an example)"
	}
	return ""
}
