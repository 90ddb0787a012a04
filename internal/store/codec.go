package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// Format is the version of the records this vip writes and the newest it
// reads. A record without one is of format 1, the first. Raise it when a
// record's meaning changes in a way an older vip would misread; adding a
// field an older vip may ignore does not.
const Format = 1

// FailsafeFormat is the format of the failsafe sets this vip writes: 2,
// a set that names its nodes by revision (FailsafeSet). An older vip reads
// one as a set that does not decode, which holds its takes while the
// set's owner lives and after: every agent of a fleet must run a vip that
// reads them.
const FailsafeFormat = 2

// formatOf is the format this vip writes, and the newest it reads, of
// rec's kind.
func formatOf(rec any) int {
	if _, ok := rec.(FailsafeSet); ok {
		return FailsafeFormat
	}
	return Format
}

// Versioned carries a record's format. It is embedded in every record, so
// that its field sits beside the record's own in the JSON.
type Versioned struct {
	Format int `json:"format,omitempty"`
}

func (v *Versioned) versioned() *Versioned { return v }

// Record is one of the records vip keeps in the store.
type Record interface {
	Node | Claim | Standby | Move | Cordon | Lingering | Change | FailsafeSet
}

// Encode writes rec as the store keeps it, stamped with this vip's Format.
func Encode[T Record, P interface {
	*T
	versioned() *Versioned
}](rec T) ([]byte, error) {
	P(&rec).versioned().Format = formatOf(rec)
	return json.Marshal(rec)
}

// Decode reads the record at key. A value that is not one, or one written
// by a newer vip in a format this one does not know, gives an error naming
// the key, for the report of skipped records.
func Decode[T Record, P interface {
	*T
	versioned() *Versioned
}](key string, value []byte) (T, error) {
	var v T
	limit := maxRecordBytes
	if _, ok := any(v).(Lingering); ok {
		limit = maxLingeringBytes
	}
	if len(value) > limit {
		return v, fmt.Errorf("the value of %s is %d bytes, too large for a vip record", key, len(value))
	}
	if err := json.Unmarshal(value, &v); err != nil {
		return v, fmt.Errorf("the value of %s is not a vip record: %v", key, err)
	}
	if f := P(&v).versioned().Format; f > formatOf(v) {
		return v, &FormatError{Key: key, Format: f, Reads: formatOf(v)}
	}
	return v, nil
}

// FormatError is a record written by a newer vip, in a format this one
// does not read.
type FormatError struct {
	Key    string
	Format int
	// Reads is the newest format of its kind this vip reads.
	Reads int
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("the value of %s was written by a newer vip (record format %d, this one reads up to %d): upgrade vip on this host", e.Key, e.Format, e.Reads)
}

// Duration is a time.Duration as records write it, such as "6s": the
// store's own type, so that its format does not follow the HTTP API's.
type Duration time.Duration

// MarshalText writes d like time.Duration's String.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText parses d with time.ParseDuration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration such as 6s", b)
	}
	*d = Duration(v)
	return nil
}
