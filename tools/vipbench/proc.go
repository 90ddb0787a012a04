package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of utime and stime in /proc/PID/stat. The kernel
// reports them in USER_HZ, which is 100 on every architecture Linux runs Go
// on (sysconf(_SC_CLK_TCK) says the same, but needs cgo).
const userHZ = 100

// cpuTicks returns the CPU time a process has used, user and system, all
// threads, in USER_HZ ticks: fields 14 and 15 of /proc/PID/stat.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatTicks(b)
}

func parseStatTicks(stat []byte) (int64, error) {
	// The command name (field 2) is in parentheses and may hold spaces;
	// the fields after the last ')' start with field 3, the state.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat: no command name")
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("stat: %d fields after the command name, want at least 13", len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("stat: utime %q, stime %q", f[11], f[12])
	}
	return utime + stime, nil
}

// rssKiB returns a process's resident set size, VmRSS of /proc/PID/status.
func rssKiB(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseVmRSS(f)
}

// rssParts returns the process's resident anonymous and file-backed memory
// in KiB (RssAnon, RssFile in /proc/PID/status).
func rssParts(pid int) (anon, file int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || (name != "RssAnon" && name != "RssFile") {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("status: %s %q", name, rest)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, err
		}
		if name == "RssAnon" {
			anon = n
		} else {
			file = n
		}
	}
	return anon, file, nil
}

func parseVmRSS(f interface{ Read([]byte) (int, error) }) (int64, error) {
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("status: VmRSS %q", rest)
		}
		return strconv.ParseInt(fields[0], 10, 64)
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("status: no VmRSS line")
}

// cpuMeter measures the share of one core a process uses over a stretch of
// time.
type cpuMeter struct {
	pid    int
	start  time.Time
	ticks0 int64
}

func startCPU(pid int) (*cpuMeter, error) {
	t, err := cpuTicks(pid)
	if err != nil {
		return nil, fmt.Errorf("cpu of pid %d: %w", pid, err)
	}
	return &cpuMeter{pid: pid, start: time.Now(), ticks0: t}, nil
}

// cpuUse is CPU time used over a wall-clock stretch.
type cpuUse struct {
	CPU, Wall time.Duration
}

// Percent returns the share of one core, in percent.
func (u cpuUse) Percent() float64 {
	if u.Wall <= 0 {
		return 0
	}
	return 100 * u.CPU.Seconds() / u.Wall.Seconds()
}

// Resolution returns the smallest share of a core the measurement can
// tell from zero: one tick over the stretch.
func (u cpuUse) Resolution() float64 {
	if u.Wall <= 0 {
		return 0
	}
	return 100 * (time.Second / userHZ).Seconds() / u.Wall.Seconds()
}

func (m *cpuMeter) stop() (cpuUse, error) {
	t, err := cpuTicks(m.pid)
	if err != nil {
		return cpuUse{}, fmt.Errorf("cpu of pid %d: %w", m.pid, err)
	}
	return cpuUse{CPU: time.Duration(t-m.ticks0) * time.Second / userHZ, Wall: time.Since(m.start)}, nil
}

// machineTicks returns the busy and total CPU time of all cores so far,
// in USER_HZ ticks, from the first line of /proc/stat (busy is everything
// but idle and iowait).
func machineTicks() (busy, total int64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	return parseProcStat(b)
}

func parseProcStat(b []byte) (busy, total int64, err error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: first line %q", line)
	}
	// Guest time is also counted in user and nice: leave it out.
	for i, v := range f[1:min(len(f), 9)] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %q: %w", v, err)
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total, nil
}

// machineMeter measures how busy the whole machine was over a stretch.
type machineMeter struct{ busy, total int64 }

func startMachine() *machineMeter {
	busy, total, err := machineTicks()
	if err != nil {
		return nil
	}
	return &machineMeter{busy, total}
}

// stop returns the busy share of all cores together, 0 to 1.
func (m *machineMeter) stop() (float64, bool) {
	if m == nil {
		return 0, false
	}
	busy, total, err := machineTicks()
	if err != nil || total <= m.total {
		return 0, false
	}
	return float64(busy-m.busy) / float64(total-m.total), true
}

// loadAvg returns the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
