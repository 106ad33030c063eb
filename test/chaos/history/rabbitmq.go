package history

import (
	"encoding/json"
	"fmt"
)

// Queue is one line of `rabbitmqctl list_queues name messages arguments
// --formatter json`.
type Queue struct {
	Name     string
	Messages int
	Args     map[string]any // x-expires, x-max-length, x-queue-type, ...
}

// ParseQueues reads rabbitmqctl's JSON list of queues. Its arguments come
// as [name, type, value] triples (rabbitmqctl 3.x and 4.x), or as an object.
func ParseQueues(out []byte) ([]Queue, error) {
	var raw []struct {
		Name     string          `json:"name"`
		Messages int             `json:"messages"`
		Args     json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(out, &raw); err != nil {
		return nil, err
	}
	qs := make([]Queue, 0, len(raw))
	for _, r := range raw {
		q := Queue{Name: r.Name, Messages: r.Messages, Args: map[string]any{}}
		if len(r.Args) > 0 && string(r.Args) != "null" {
			if err := parseArgs(r.Name, r.Args, q.Args); err != nil {
				return nil, err
			}
		}
		qs = append(qs, q)
	}
	return qs, nil
}

func parseArgs(queue string, raw json.RawMessage, into map[string]any) error {
	var triples [][]any
	if err := json.Unmarshal(raw, &triples); err != nil {
		if err := json.Unmarshal(raw, &into); err != nil {
			return fmt.Errorf("queue %s: arguments %.100s: neither [name, type, value] triples nor an object", queue, raw)
		}
		return nil
	}
	for _, t := range triples {
		if len(t) != 3 {
			return fmt.Errorf("queue %s: argument %v is not [name, type, value]", queue, t)
		}
		name, ok := t[0].(string)
		if !ok {
			return fmt.Errorf("queue %s: argument name %v is not a string", queue, t[0])
		}
		into[name] = t[2]
	}
	return nil
}
