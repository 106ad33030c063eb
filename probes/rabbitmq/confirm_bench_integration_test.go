//go:build integration

package rabbitmq_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// BenchmarkConfirmChannels is the publish-confirm path of
// test/bench/peer-rabbitmq.sh without the rest of the probe: 2 publishers
// each confirming every persistent 1 KiB message before the next (PerfTest
// -x 2 -c 1), into one durable queue a consumer drains, on one shared channel
// (what the probe does: its workers share the publishing channel), on a
// channel each, and on a connection each (what PerfTest does). With -count N
// the three alternate; each prints its confirm latency p50/p99 and msg/s.
//
//	go test -tags integration -run '^$' -bench ConfirmChannels -benchtime 1000x -count 3 ./probes/rabbitmq/
func BenchmarkConfirmChannels(b *testing.B) {
	for _, mode := range []string{"shared-channel", "channel-each", "connection-each"} {
		b.Run(mode, func(b *testing.B) {
			queue := fmt.Sprintf("dbcanary-confirm-bench-%d", os.Getpid())
			pubs := confirmPublishers(b, mode, queue)
			body := make([]byte, 1024)
			lat := make([][]time.Duration, len(pubs))
			var wg sync.WaitGroup
			b.ResetTimer()
			for i, ch := range pubs {
				wg.Go(func() {
					for range b.N {
						start := time.Now()
						dc, err := ch.PublishWithDeferredConfirm("", queue, false, false, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: body})
						if err != nil || !dc.Wait() {
							b.Errorf("publish: %v", err)
							return
						}
						lat[i] = append(lat[i], time.Since(start))
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			all := slices.Concat(lat...)
			slices.Sort(all)
			if len(all) == 0 {
				b.Fatal("no publish confirmed")
			}
			b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(len(all))/b.Elapsed().Seconds(), "msg/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// confirmPublishers opens 2 publishing channels in confirm mode as mode says,
// declares queue and drains it with an auto-ack consumer; all closed at the end.
func confirmPublishers(b *testing.B, mode, queue string) []*amqp.Channel {
	pw, err := os.ReadFile(env["DBCANARY_TEST_RABBITMQ_PASSWORD_FILE"])
	if err != nil {
		b.Fatal(err)
	}
	cfg := amqp.Config{SASL: []amqp.Authentication{&amqp.PlainAuth{Username: env["DBCANARY_TEST_RABBITMQ_USER"], Password: strings.TrimSpace(string(pw))}}}
	conn := func() *amqp.Connection {
		c, err := amqp.DialConfig(env["DBCANARY_TEST_RABBITMQ_URL"], cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		return c
	}
	channel := func(c *amqp.Connection) *amqp.Channel {
		ch, err := c.Channel()
		if err != nil {
			b.Fatal(err)
		}
		return ch
	}
	first := conn()
	cons := channel(first)
	if _, err := cons.QueueDeclare(queue, true, false, false, false, amqp.Table{"x-expires": int32(60000)}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _, _ = cons.QueueDelete(queue, false, false, false) })
	if _, err := cons.Consume(queue, "", true, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	var pubs []*amqp.Channel
	switch mode {
	case "shared-channel":
		ch := channel(first)
		pubs = []*amqp.Channel{ch, ch}
	case "channel-each":
		pubs = []*amqp.Channel{channel(first), channel(first)}
	default:
		pubs = []*amqp.Channel{channel(conn()), channel(conn())}
	}
	for _, ch := range pubs {
		if err := ch.Confirm(false); err != nil {
			b.Fatal(err)
		}
	}
	return pubs
}
