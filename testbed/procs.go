package main

// Child processes: each component runs as this same binary re-executed with a subcommand, in a
// process group of its own (a Ctrl-C in the terminal reaches only the supervisor, which then
// stops them in order), writing its output to a log file in the state folder. A child dies with
// the supervisor: the kernel sends it SIGKILL when the supervisor's spawning thread ends
// (Pdeathsig), and every child also watches its parent process id as a second guard.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

type proc struct {
	name    string   // e.g. "alpha/kube-apiserver"
	args    []string // after the binary's own path
	logPath string

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	err      error
	stopping bool
}

type spawnRequest struct {
	p     *proc
	reply chan error
}

// spawner starts every child from one goroutine locked to its OS thread for the supervisor's
// whole life: Pdeathsig fires when the thread that forked a child ends, not the process, so
// the forking thread must never end while the supervisor runs.
type spawner struct {
	self     string
	requests chan spawnRequest
	// Unexpected exits, for the supervisor to act on.
	exits chan *proc
}

func newSpawner() (*spawner, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	s := &spawner{self: self, requests: make(chan spawnRequest), exits: make(chan *proc, 16)}
	go func() {
		runtime.LockOSThread()
		for req := range s.requests {
			req.reply <- s.startNow(req.p)
		}
	}()
	return s, nil
}

func (s *spawner) start(p *proc) error {
	reply := make(chan error)
	s.requests <- spawnRequest{p, reply}
	return <-reply
}

func (s *spawner) startNow(p *proc) error {
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	fmt.Fprintf(log, "==== %s: starting %s\n", time.Now().Format(time.RFC3339Nano), p.name)
	cmd := exec.Command(s.self, p.args...)
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(os.Environ(), parentEnv+"="+fmt.Sprint(os.Getpid()))
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	p.mu.Lock()
	p.cmd, p.done, p.err, p.stopping = cmd, make(chan struct{}), nil, false
	done := p.done
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		stopping := p.stopping
		p.mu.Unlock()
		close(done)
		if !stopping {
			s.exits <- p
		}
	}()
	return nil
}

// running says whether the process is alive.
func (p *proc) running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// exited returns a channel closed when the current process ends (nil before it started).
func (p *proc) exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// stop asks the process to end (SIGTERM), then kills it after `grace`; it returns once it ended.
func (p *proc) stop(grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.stopping = true
	p.mu.Unlock()
	if cmd == nil || done == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
	}
}

// failure describes an unexpected exit with the end of the process's log.
func (p *proc) failure() error {
	p.mu.Lock()
	err := p.err
	p.mu.Unlock()
	if err == nil {
		err = errors.New("exited")
	}
	return fmt.Errorf("%s ended unexpectedly (%v); the end of %s:\n%s", p.name, err, p.logPath, tail(p.logPath, 30))
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.ReplaceAll(string(bytes.Join(lines, []byte("\n"))), "\n", "\n    ")
}

// parentEnv carries the supervisor's process id to its children.
const parentEnv = "GITFLEET_TESTBED_PARENT"

// watchParent ends this process when the process that started it is gone (its parent id
// changes: the orphan was handed to another process). Pdeathsig does the same in most cases;
// this covers the rest.
func watchParent(onGone func()) {
	parent := os.Getppid()
	go func() {
		for range time.Tick(500 * time.Millisecond) {
			if os.Getppid() != parent {
				onGone()
				return
			}
		}
	}()
}

func logPath(stateDir, name string) string {
	return filepath.Join(stateDir, "logs", strings.ReplaceAll(name, "/", "-")+".log")
}
