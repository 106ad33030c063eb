package probes

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		want Cause
	}{
		{context.DeadlineExceeded, CauseTimeout},
		{fmt.Errorf("dial: %w", os.ErrDeadlineExceeded), CauseTimeout},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, CauseRefused},
		{&net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}, CauseDNS},
		{&xml.SyntaxError{Msg: "bad", Line: 1}, CauseServer},
		{errors.New(`Get "https://127.0.0.1:9000/": http: server gave HTTP response to HTTPS client`), CauseTLS},
		{errors.New(`net/http: HTTP/1.x transport connection broken: malformed HTTP status code "x"`), CauseServer},
		{errors.New("Connection closed by foreign host http://127.0.0.1:9000/. Retry again."), CauseRefused},
		// A PUT whose server went away while the body was sent (MinIO stopped
		// behind a proxy, make soak-chaos): the siblings of the same outage
		// are reset and broken pipe, so refused, not other.
		{&url.Error{Op: "Put", URL: "http://127.0.0.1:9000/b/k", Err: &net.OpError{Op: "readfrom", Net: "tcp", Err: &net.OpError{Op: "write", Net: "tcp", Err: net.ErrClosed}}}, CauseRefused},
		{errors.New(`Put "http://127.0.0.1:9000/b/k": readfrom tcp 127.0.0.1:1->127.0.0.1:9000: write tcp 127.0.0.1:1->127.0.0.1:9000: use of closed network connection`), CauseRefused},
		{Fail(CauseMismatch, errors.New("differs")), CauseMismatch},
		{fmt.Errorf("outer: %w", Fail(CauseAuth, nil)), CauseAuth},
		{errors.New("something new"), CauseOther},
	}
	for _, c := range cases {
		if got := CauseOf(c.err); got != c.want {
			t.Errorf("CauseOf(%v) = %s, want %s", c.err, got, c.want)
		}
	}
	if CauseOf(nil) != "" {
		t.Error("nil error has a cause")
	}
}

func TestDataCause(t *testing.T) {
	for _, c := range Causes {
		want := c == CauseMismatch || c == CauseNotFound || c == CauseLost
		if c.DataCause() != want {
			t.Errorf("%s.DataCause() = %v", c, !want)
		}
	}
}
