// Package gatewaytest drives rmq-gateway with aws-sdk-go-v2's SQS client (which checks the
// MD5s of what it sends and receives). TestMain starts one redis-server with the module and
// one rmq-gateway on free 127.0.0.1 ports for the whole run and stops them by pid.
// Binaries: ../../target/release (RMQ_GATEWAY, RMQ_MODULE, RMQ_SERVER_BIN override them).
package gatewaytest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var (
	repo     string
	endpoint string // the gateway's base URL
)

type server struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when it has exited
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	repo, err = filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "rmq-gw-go-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	redisPort := freePort()
	redis, err := start(dir, "redis.log", env("RMQ_SERVER_BIN", "redis-server"), "--port", fmt.Sprint(redisPort),
		"--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no", "--daemonize", "no",
		"--loadmodule", env("RMQ_MODULE", filepath.Join(repo, "target", "release", "librmq.so")))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer redis.stop()
	if err := waitFor(redis, func() bool { return redisAnswers(redisPort) }); err != nil {
		fmt.Fprintln(os.Stderr, "redis-server:", err)
		return 1
	}
	gwPort := freePort()
	gw, err := start(dir, "gateway.log", env("RMQ_GATEWAY", filepath.Join(repo, "target", "release", "rmq-gateway")),
		"--listen", fmt.Sprintf("127.0.0.1:%d", gwPort), "--redis", fmt.Sprintf("redis://127.0.0.1:%d", redisPort))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer gw.stop()
	if err := waitFor(gw, func() bool {
		b, _ := os.ReadFile(gw.log)
		return strings.Contains(string(b), "listening on")
	}); err != nil {
		fmt.Fprintln(os.Stderr, "rmq-gateway:", err)
		return 1
	}
	endpoint = fmt.Sprintf("http://127.0.0.1:%d", gwPort)
	return m.Run()
}

func start(dir, logName, bin string, args ...string) (*server, error) {
	log := filepath.Join(dir, logName)
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr, cmd.Dir = f, f, dir
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", bin, err)
	}
	f.Close()
	s := &server{cmd: cmd, log: log, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	return s, nil
}

func (s *server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// stop: SIGTERM to its pid, SIGKILL if it is still there after 15 s.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

func waitFor(s *server, ready func() bool) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if ready() {
			return nil
		}
		if s.exited() {
			b, _ := os.ReadFile(s.log)
			return fmt.Errorf("exited: %s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := os.ReadFile(s.log)
	s.stop()
	return fmt.Errorf("did not start: %s", b)
}

func redisAnswers(port int) bool {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.TrimSpace(line) == "+PONG"
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func env(name, otherwise string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return otherwise
}

// readmeHas: whether docs/gateway.md holds the lines between "// README:<tag> begin" and
// "// README:<tag> end" in source, one tab of indentation less.
func readmeHas(t *testing.T, tag, source string) bool {
	t.Helper()
	src, err := os.ReadFile(source)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	in := false
	for _, l := range strings.Split(string(src), "\n") {
		switch strings.TrimSpace(l) {
		case "// README:" + tag + " begin":
			in = true
			continue
		case "// README:" + tag + " end":
			in = false
		}
		if in {
			want = append(want, strings.TrimPrefix(l, "\t"))
		}
	}
	if len(want) == 0 {
		t.Fatalf("no README:%s markers in %s", tag, source)
	}
	readme, err := os.ReadFile(filepath.Join(repo, "docs", "gateway.md"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(readme), strings.Join(want, "\n")+"\n")
}
