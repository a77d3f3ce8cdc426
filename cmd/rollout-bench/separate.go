package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rollout/rollout/cmd/internal/serve"
	"github.com/rollout/rollout/internal/logwriter"
)

// With --separate, the --wrk measurement runs each server in a process of
// its own, as deployments run them: this program started again with
// serverEnv set. Each side then has its own garbage collector and heap,
// which in one process they share, and each side's CPU time per request is
// read from /proc.

// serverEnv makes this program a server: "rollout PATH" serves the
// database at PATH as the binary does, "bare PATH" answers the contents of
// the file at PATH to every request. It prints its URL on a line of its
// standard output, and serves until its standard input closes.
const serverEnv = "ROLLOUT_BENCH_SERVER"

// profileEnv, beside serverEnv, makes the server process write a CPU
// profile of itself to the file it names, from the moment it serves to
// the moment it stops (--pprof with --separate). The process takes it
// itself with runtime/pprof: the server serves no profiling endpoint.
const profileEnv = "ROLLOUT_BENCH_SERVER_CPUPROFILE"

// childStart bounds how long a server process may take to start.
const childStart = 30 * time.Second

// child is a server in a process of its own.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	url   string
	done  chan error // the process's exit

	closeOnce sync.Once
	closeErr  error
}

// startChild starts this program as the server spec (see serverEnv),
// writing a CPU profile of itself to the file profile unless it is "".
func startChild(ctx context.Context, spec, profile string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), serverEnv+"="+spec, profileEnv+"="+profile)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, stdin: stdin, done: make(chan error, 1)}
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- strings.TrimSpace(line)
		io.Copy(io.Discard, stdout)
		c.done <- cmd.Wait()
	}()
	timer := time.NewTimer(childStart)
	defer timer.Stop()
	select {
	case c.url = <-lines:
		if strings.HasPrefix(c.url, "http://127.0.0.1:") {
			return c, nil
		}
		err = fmt.Errorf("server %q printed %q, not its URL", spec, c.url)
	case <-timer.C:
		err = fmt.Errorf("server %q did not start within %v", spec, childStart)
	case <-ctx.Done():
		err = ctx.Err()
	}
	c.kill()
	return nil, err
}

// cpu returns the CPU time, user and system, the process has used so far.
func (c *child) cpu() (time.Duration, error) {
	return processCPU(c.cmd.Process.Pid)
}

// close asks the server to stop, and kills it if it has not within ten
// seconds; calls after the first return the first's error.
func (c *child) close() error {
	c.closeOnce.Do(func() {
		c.stdin.Close()
		select {
		case c.closeErr = <-c.done:
		case <-time.After(10 * time.Second):
			c.kill()
			c.closeErr = errors.New("a server process did not stop within 10s: killed")
		}
	})
	return c.closeErr
}

func (c *child) kill() {
	c.cmd.Process.Kill()
	<-c.done
}

// clockTicks is the unit of /proc/PID/stat's CPU times: USER_HZ, 100 on
// Linux.
const clockTicks = 100

// processCPU reads the CPU time of process pid from /proc (Linux).
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, fmt.Errorf("read the CPU time of a server process (needs Linux's /proc): %w", err)
	}
	// The command name, in parentheses, may hold spaces: the fields that
	// follow are counted from its closing parenthesis. utime and stime are
	// fields 14 and 15, the 12th and 13th after it.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// serverMain is a server process (see serverEnv and profileEnv); it
// returns the exit code.
func serverMain(spec string, stdin io.Reader, stdout, stderr io.Writer) int {
	kind, path, _ := strings.Cut(spec, " ")
	var url string
	var stop func() error
	switch kind {
	case "rollout":
		// Logged as the binary logs to stderr, to the null device.
		logs, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		defer logs.Close()
		lw := logwriter.New(logs, logwriter.DefaultQueue)
		// As the binary's serve command, with the binary's collector.
		defer serve.TuneGC(os.Getenv)()
		srv := &serve.Server{Addr: loopback, DBPath: path, Log: slog.New(slog.NewTextHandler(lw, nil)), LogWriter: lw}
		if err := srv.Open(context.Background()); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		url, stop = srv.URL(), srv.Close
	case "bare":
		body, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		base, err := serveBaseline(bare(body))
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		url, stop = base.url, base.close
	default:
		fmt.Fprintf(stderr, "%s=%q: want \"rollout PATH\" or \"bare PATH\"\n", serverEnv, spec)
		return 2
	}
	stopProfile := func() error { return nil }
	if path := os.Getenv(profileEnv); path != "" {
		var err error
		if stopProfile, err = startCPUProfile(path); err != nil {
			fmt.Fprintln(stderr, errors.Join(err, stop()))
			return 1
		}
	}
	fmt.Fprintln(stdout, url)
	io.Copy(io.Discard, stdin) // until the parent closes it, or exits
	if err := errors.Join(stop(), stopProfile()); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
