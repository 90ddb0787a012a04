package agent

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Paths derives the files an agent keeps beside its socket, so that agents
// with different sockets never share one.
type Paths struct {
	Socket, Lock, State, Log string
}

// PathsFor returns the paths of the agent on socket.
func PathsFor(socket string) Paths {
	base := strings.TrimSuffix(socket, ".sock")
	return Paths{Socket: socket, Lock: socket + ".lock", State: base + ".state", Log: base + ".log"}
}

// ErrRunning is returned when another agent already serves the socket.
var ErrRunning = errors.New("another vip agent is already running on this socket")

// lockFile holds the agent's lock: an exclusive flock on the lock file, held
// for the agent's life, with its pid written inside for the error message of
// the next one. The kernel drops the lock when the process dies, so a crash
// never leaves a stale lock.
type lockFile struct{ f *os.File }

func acquireLock(path string) (*lockFile, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create the directory for the agent's socket: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the agent's lock file: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			pid := strings.TrimSpace(string(b[:n]))
			return nil, fmt.Errorf("%w (pid %s, lock %s): stop it first, or give this one another --socket", ErrRunning, pid, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return &lockFile{f: f}, nil
}

func (l *lockFile) release() {
	_ = os.Remove(l.f.Name())
	l.f.Close()
}

// listen creates the socket, readable and writable by root alone, or also by
// group when one is given. A socket file left by a dead agent is removed
// first; the lock proves no live agent uses it.
func listen(path string, group string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove the old socket %s: %w", path, err)
	}
	// The umask makes the socket private from the moment it exists.
	old := unix.Umask(0o177)
	ln, err := net.Listen("unix", path)
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	if group != "" {
		gid, err := lookupGroup(group)
		if err != nil {
			ln.Close()
			return nil, err
		}
		if err := os.Chown(path, -1, gid); err != nil {
			ln.Close()
			return nil, fmt.Errorf("give group %s the socket: %w", group, err)
		}
		if err := os.Chmod(path, 0o660); err != nil {
			ln.Close()
			return nil, fmt.Errorf("open the socket to group %s: %w", group, err)
		}
	}
	return ln, nil
}

func lookupGroup(name string) (int, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		if gid, perr := strconv.Atoi(name); perr == nil {
			return gid, nil
		}
		return 0, fmt.Errorf("group %q does not exist: create it (groupadd %s) or name another with --group", name, name)
	}
	return strconv.Atoi(g.Gid)
}

// GroupAllow allows root, the agent's own user, and members of gid (by their
// primary group or, read from /proc, a supplementary one).
func GroupAllow(gid int) func(Peer) error {
	self := os.Geteuid()
	return func(p Peer) error {
		if p.UID == 0 || p.UID == self || (gid >= 0 && (p.GID == gid || inGroup(p.PID, gid))) {
			return nil
		}
		return fmt.Errorf("uid %d may not use the vip agent: run vip as root (sudo), or add the user to the agent's group", p.UID)
	}
}

// SelfAllow allows root and the agent's own user.
func SelfAllow() func(Peer) error { return GroupAllow(-1) }

func inGroup(pid, gid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Groups:"); ok {
			for _, f := range strings.Fields(rest) {
				if f == strconv.Itoa(gid) {
					return true
				}
			}
		}
	}
	return false
}
