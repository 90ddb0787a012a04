package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Paths derives the files an agent keeps beside its socket, so that agents
// with different sockets never share one.
type Paths struct {
	Socket, Lock, State, Log string
	// Key is the failsafe's key (failsafe.LoadKey).
	Key string
}

// PathsFor returns the paths of the agent on socket.
func PathsFor(socket string) Paths {
	base := strings.TrimSuffix(socket, ".sock")
	return Paths{Socket: socket, Lock: socket + ".lock", State: base + ".state", Log: base + ".log", Key: base + ".failsafe-key"}
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

// keptListener serves the agent's socket and makes it again when its file
// disappears (deleted by hand, or by a cleaner of /run or /tmp) while the
// agent runs. Without it the agent would hold its claims on a socket nobody
// can reach, and the next `vip claim` would find no agent, try to start
// one and fail on the lock. Connections from the old socket and the new
// one come out of one Accept.
type keptListener struct {
	path, group string
	log         *slog.Logger

	conns chan accepted
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup

	mu  sync.Mutex
	cur net.Listener
	// old is the listener of a deleted socket. It is closed at the next
	// check, once the connections made just before the deletion, still in
	// its backlog, have been accepted.
	old net.Listener
}

type accepted struct {
	c   net.Conn
	err error
}

// keepSocket serves ln, which listens on path, and checks every interval
// that path still exists, listening there again when it does not.
func keepSocket(ln net.Listener, path, group string, every time.Duration, log *slog.Logger) *keptListener {
	k := &keptListener{path: path, group: group, log: log, conns: make(chan accepted), done: make(chan struct{}), cur: ln}
	k.serve(ln)
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-k.done:
				return
			case <-t.C:
				k.check()
			}
		}
	}()
	return k
}

// check listens on path again if its file is gone. A file of another kind
// there, or another socket, is left alone.
func (k *keptListener) check() {
	k.mu.Lock()
	if k.old != nil {
		k.old.Close()
		k.old = nil
	}
	k.mu.Unlock()
	if _, err := os.Lstat(k.path); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err := os.MkdirAll(filepath.Dir(k.path), 0o755); err != nil {
		k.log.Error("the agent's socket was deleted and its directory cannot be made again", "socket", k.path, "err", err)
		return
	}
	ln, err := listen(k.path, k.group)
	if err != nil {
		k.log.Error("the agent's socket was deleted and cannot be made again", "socket", k.path, "err", err)
		return
	}
	k.mu.Lock()
	select {
	case <-k.done:
		k.mu.Unlock()
		ln.Close()
		return
	default:
	}
	// The old socket has no name any more: nobody can connect to it.
	// Closing it must not remove the new socket's name.
	k.cur.(*net.UnixListener).SetUnlinkOnClose(false)
	k.old, k.cur = k.cur, ln
	k.serve(ln)
	k.mu.Unlock()
	k.log.Warn("the agent's socket was deleted: made it again", "socket", k.path)
}

// serve accepts on ln until it is closed.
func (k *keptListener) serve(ln net.Listener) {
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				k.mu.Lock()
				retired := k.cur != ln
				k.mu.Unlock()
				if retired || errors.Is(err, net.ErrClosed) {
					return
				}
			}
			select {
			case k.conns <- accepted{c, err}:
			case <-k.done:
				if c != nil {
					c.Close()
				}
				return
			}
		}
	}()
}

// Accept waits for a connection on the socket, old or new.
func (k *keptListener) Accept() (net.Conn, error) {
	select {
	case a := <-k.conns:
		return a.c, a.err
	case <-k.done:
		return nil, net.ErrClosed
	}
}

// Close stops listening, removes the socket and waits for its goroutines.
func (k *keptListener) Close() error {
	var err error
	k.once.Do(func() {
		k.mu.Lock()
		close(k.done)
		if k.old != nil {
			k.old.Close()
		}
		err = k.cur.Close()
		k.mu.Unlock()
		k.wg.Wait()
	})
	return err
}

// Addr returns the socket's address.
func (k *keptListener) Addr() net.Addr {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cur.Addr()
}
