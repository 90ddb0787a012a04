// Package journal writes vip's logs the way the systemd journal reads
// them, when standard error is connected to it.
//
// Under systemd a service's standard error goes to the journal (the
// default StandardError= of a unit), which stamps every line with its own
// time and, unless a line says otherwise, gives each the unit's one
// SyslogLevel=. Whether standard error is that stream is go-systemd's
// journal.StderrIsJournalStream to tell (the device and inode of the
// descriptor against those systemd puts in $JOURNAL_STREAM); cmd asks it
// only when the logs go to the process's own standard error, not to a
// --log-file, since the variable is inherited by processes whose standard
// error was replaced. Handler then writes each slog record without its
// time, after the syslog priority of its level in the "<N>" form that
// journald takes off a stream line and keeps as the line's priority
// (SyslogLevelPrefix=, true by default); the rest of the line is the text
// or JSON that slog's own handlers write.
//
// The documents followed are systemd.exec(5), "Environment Variables Set
// or Propagated by the Service Manager" ($JOURNAL_STREAM) and its
// SyslogLevelPrefix=, and sd-daemon(3) for the prefixes (SD_ERR "<3>",
// SD_WARNING "<4>", SD_INFO "<6>", SD_DEBUG "<7>").
package journal
