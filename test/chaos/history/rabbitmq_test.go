package history

import "testing"

// The 2-hour run of 6 Dec 2026 failed its RabbitMQ leftover rows on
// rabbitmqctl's own output: its arguments are [name, type, value] triples,
// which the check read as an object ("cannot unmarshal array").
func TestParseQueues(t *testing.T) {
	out := `[
{"name":"dbcanary.mq.chaos.ledger","messages":30,"arguments":[["x-expires","long",1800000],["x-max-length","long",1000],["x-queue-type","longstr","quorum"]]}
,{"name":"dbcanary.mq.chaos","messages":2,"arguments":[["x-expires","long",1800000]]}
,{"name":"plain","messages":0,"arguments":[]}
,{"name":"object","messages":1,"arguments":{"x-expires":60000}}
]`
	qs, err := ParseQueues([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 4 {
		t.Fatalf("%d queues: %+v", len(qs), qs)
	}
	if q := qs[0]; q.Name != "dbcanary.mq.chaos.ledger" || q.Messages != 30 || q.Args["x-expires"] != float64(1800000) || q.Args["x-queue-type"] != "quorum" {
		t.Errorf("ledger queue: %+v", q)
	}
	if _, ok := qs[2].Args["x-expires"]; ok {
		t.Errorf("plain queue has x-expires: %+v", qs[2])
	}
	if qs[3].Args["x-expires"] != float64(60000) {
		t.Errorf("object arguments: %+v", qs[3])
	}
	if _, err := ParseQueues([]byte(`[{"name":"q","messages":0,"arguments":[["x-expires",1]]}]`)); err == nil {
		t.Error("a two-element argument was accepted")
	}
}
