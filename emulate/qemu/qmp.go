package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// qmp is a client of one QEMU's monitor (QMP) on a unix socket: one
// command at a time, and the reason of the SHUTDOWN event QEMU sends before
// it exits.
type qmp struct {
	conn    net.Conn
	mu      sync.Mutex // one command at a time
	replies chan qmpReply

	smu    sync.Mutex
	reason string // the last SHUTDOWN event's reason ("guest-reset", "host-qmp-quit", …)
}

type qmpReply struct {
	Return json.RawMessage `json:"return"`
	Error  *struct {
		Class, Desc string
	} `json:"error"`
}

type qmpMessage struct {
	qmpReply
	Event string `json:"event"`
	Data  struct {
		Reason string `json:"reason"`
	} `json:"data"`
}

// dialQMP connects to the socket at path, retrying until QEMU has made it
// or ctx ends, and leaves capability negotiation done.
func dialQMP(ctx context.Context, path string) (*qmp, error) {
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "unix", path)
		if err == nil {
			q := &qmp{conn: conn, replies: make(chan qmpReply, 1)}
			sc := bufio.NewScanner(conn)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			if !sc.Scan() { // the greeting: {"QMP": {...}}
				conn.Close()
				return nil, fmt.Errorf("QMP %s: no greeting: %v", path, sc.Err())
			}
			go q.read(sc)
			if err := q.run("qmp_capabilities"); err != nil {
				conn.Close()
				return nil, err
			}
			return q, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("QMP %s: %w (last: %v)", path, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// read dispatches replies to run and keeps the SHUTDOWN reason, until the
// connection closes (QEMU exited).
func (q *qmp) read(sc *bufio.Scanner) {
	defer close(q.replies)
	for sc.Scan() {
		var m qmpMessage
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		switch {
		case m.Event == "SHUTDOWN":
			q.smu.Lock()
			q.reason = m.Data.Reason
			q.smu.Unlock()
		case m.Event != "":
		default:
			q.replies <- m.qmpReply
		}
	}
}

// shutdownReason is the reason of the SHUTDOWN event QEMU sent, "" if none.
func (q *qmp) shutdownReason() string {
	q.smu.Lock()
	defer q.smu.Unlock()
	return q.reason
}

// run executes a QMP command without arguments and waits for its reply.
// A command that makes QEMU exit (quit, system_reset under -no-reboot) may
// lose its reply to the closing connection: that is not an error.
func (q *qmp) run(command string) error { return q.runArgs(command, nil) }

// runArgs is run with the command's arguments (none when nil).
func (q *qmp) runArgs(command string, args map[string]any) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	msg := map[string]any{"execute": command}
	if args != nil {
		msg["arguments"] = args
	}
	b, _ := json.Marshal(msg)
	_ = q.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := q.conn.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("QMP %s: %w", command, err)
	}
	select {
	case r, ok := <-q.replies:
		if !ok {
			return nil // QEMU exited
		}
		if r.Error != nil {
			return fmt.Errorf("QMP %s: %s: %s", command, r.Error.Class, r.Error.Desc)
		}
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("QMP " + command + ": no reply within 10s")
	}
}

func (q *qmp) close() { q.conn.Close() }
