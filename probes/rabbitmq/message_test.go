package rabbitmq

import (
	"strings"
	"testing"
)

func TestMessageRoundTrip(t *testing.T) {
	for _, size := range []int{minMessageSize, 1024, 1 << 20, 10} {
		h := header{instance: "pod-1", run: 0xdeadbeef, seq: 42, intended: 1700000000000000000, sent: 1700000000000001000}
		body := encode(h, size)
		if size >= minMessageSize && len(body) != size {
			t.Errorf("size %d: body is %d bytes", size, len(body))
		}
		got, err := decode(body)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		h.size = len(body)
		if got != h {
			t.Errorf("size %d: decoded %+v, want %+v", size, got, h)
		}
		if err := verify(got, body); err != nil {
			t.Errorf("size %d: intact body fails verification: %v", size, err)
		}
	}
}

func TestVerifyCatchesEveryAlteration(t *testing.T) {
	h := header{instance: "i", run: 7, seq: 9, intended: 1, sent: 2}
	body := encode(h, 512)
	parsed, _ := decode(body)
	flipped := append([]byte(nil), body...)
	flipped[400] ^= 0x01
	if err := verify(parsed, flipped); err == nil || !strings.Contains(err.Error(), "at byte 400 of 512") {
		t.Errorf("one flipped bit: %v", err)
	}
	if err := verify(parsed, body[:300]); err == nil || !strings.Contains(err.Error(), "body is 300 bytes, 512 were published") {
		t.Errorf("truncated body: %v", err)
	}
	// Another seq's payload under this header is a mismatch too.
	other, _ := decode(encode(header{instance: "i", run: 7, seq: 10, intended: 1, sent: 2}, 512))
	if err := verify(other, body); err == nil {
		t.Error("payload of seq 9 accepted for seq 10")
	}
}

func TestDecodeRejectsForeignBodies(t *testing.T) {
	for _, body := range []string{"", "hello", "dbcanary/1 a b c\n", "dbcanary/1 i zz 1 2 3 4\n", strings.Repeat("x", 300) + "\n"} {
		if _, err := decode([]byte(body)); err == nil {
			t.Errorf("decoded %q", body)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	c := DefaultConfig
	c.URL = "amqp://127.0.0.1/"
	c.PasswordEnv = "PATH" // set in every environment
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatalf("valid config: %v", errs)
	}
	c.MessageSize, c.LossTimeout, c.QueueExpires = 10, 0, 0
	var msgs []string
	for _, e := range c.Validate() {
		msgs = append(msgs, e.Error())
	}
	want := []string{
		"queue_expires: must be at least 1s, got 0s (it bounds how long an abandoned canary queue lingers)",
		"message_size: must be between 128 and 134217728 bytes, got 10",
		"loss_timeout: must be positive",
	}
	if strings.Join(msgs, "\n") != strings.Join(want, "\n") {
		t.Errorf("got %q", msgs)
	}
}

func TestQuoteRE(t *testing.T) {
	if got := quoteRE("dbcanary.mq.pod-1"); got != `dbcanary\.mq\.pod-1` {
		t.Errorf("got %q", got)
	}
}
