package opensearch

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/dbcanary/dbcanary/probes"
)

// errorBody is OpenSearch's error envelope.
type errorBody struct {
	Error struct {
		Type   string `json:"type"`
		Reason string `json:"reason"`
	} `json:"error"`
}

// httpError classifies an unexpected HTTP status:
//   - 401 is auth (the credentials are wrong);
//   - a cluster block (read-only index, disk flood-stage watermark, the
//     create-index block set when every node passed the flood stage; 403 or
//     429) is server: an operational state of the cluster, not a canary setup
//     mistake;
//   - any other 403 is setup: the user lacks an index or cluster permission;
//   - any other 429 is server, said to be the store's overload with the node's
//     own reason (a circuit breaker, a full thread-pool queue, indexing
//     pressure; see overload);
//   - a 400 saying the documents do not fit the index (mapper_parsing_exception,
//     strict_dynamic_mapping_exception, illegal_argument_exception: a template
//     or an index created by something else) is setup;
//   - a missing canary index means the namespace is gone (the engine runs
//     Prepare again, which recreates it);
//   - anything else is the server's fault.
func (p *Probe) httpError(what string, status int, body []byte) error {
	var eb errorBody
	reason := ""
	if json.Unmarshal(body, &eb) == nil && eb.Error.Type != "" {
		reason = eb.Error.Type + ": " + eb.Error.Reason
	} else {
		reason = strings.TrimSpace(string(body))
	}
	if len(reason) > 300 {
		reason = reason[:300] + "..."
	}
	msg := fmt.Errorf("opensearch target %s: %s: HTTP %d: %s", p.target, what, status, reason)
	switch {
	case status == http.StatusUnauthorized:
		return probes.Fail(probes.CauseAuth, fmt.Errorf("%w (check username and password)", msg))
	case eb.Error.Type == "cluster_block_exception", eb.Error.Type == "index_create_block_exception":
		return probes.Fail(probes.CauseServer, fmt.Errorf("%w (the index or cluster is blocked: read-only, or a disk watermark was passed)", msg))
	case status == http.StatusTooManyRequests:
		return probes.Fail(probes.CauseServer, fmt.Errorf("%w (%s)", msg, overload(eb.Error.Type, eb.Error.Reason)))
	case status == http.StatusForbidden:
		return probes.Fail(probes.CauseSetup, fmt.Errorf("%w (the canary user needs the index permissions listed in docs/opensearch.md on %s*)", msg, p.prefix))
	case status == http.StatusBadRequest && unusableIndex(eb.Error.Type):
		return probes.Fail(probes.CauseSetup, fmt.Errorf("%w (the canary index %s* does not accept the canary's documents: an index template matching it, or an index created by something else? see docs/opensearch.md)", msg, p.prefix))
	case status == http.StatusNotFound && eb.Error.Type == "index_not_found_exception":
		return probes.Fail(probes.CauseNotFound, fmt.Errorf("%w: canary index deleted behind dbcanary's back, recreating it: %w", msg, probes.ErrNamespaceGone))
	}
	return probes.Fail(probes.CauseServer, msg)
}

// unusableIndex reports whether an error type says the index's mapping or
// settings refuse what the canary writes.
func unusableIndex(errType string) bool {
	switch errType {
	case "mapper_parsing_exception", "strict_dynamic_mapping_exception", "illegal_argument_exception", "mapper_exception":
		return true
	}
	return false
}

// overload explains a 429 that is not a cluster block: the node shed the
// request to protect itself, at once rather than after a timeout. The kind
// names what to look at; the node's reason (in the message before it) says
// which breaker or pool and its limit.
func overload(errType, reason string) string {
	const tail = "the store is overloaded and refused the request: not the network, not the canary's data"
	switch {
	case errType == "circuit_breaking_exception":
		kind := "a memory circuit breaker tripped"
		if name, _, ok := strings.Cut(strings.TrimPrefix(reason, "["), "]"); ok && strings.HasPrefix(reason, "[") {
			kind = fmt.Sprintf("the %s circuit breaker tripped", name)
		}
		return kind + ": " + tail + " (heap pressure: GET _nodes/stats/breaker)"
	case strings.Contains(errType, "rejected_execution_exception"):
		if strings.Contains(reason, "coordinating") || strings.Contains(reason, "primary") || strings.Contains(reason, "replica") {
			return "indexing pressure: too many bytes of indexing in flight on the node: " + tail + " (GET _nodes/stats/indexing_pressure)"
		}
		return "a thread pool's queue is full: " + tail + " (GET _cat/thread_pool?v: the rejected column)"
	}
	return "429 Too Many Requests: " + tail + " (or a rate limit in front of it)"
}
