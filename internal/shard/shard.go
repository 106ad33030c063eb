// Package shard splits targets among the replicas of a StatefulSet by
// rendezvous (highest random weight) hashing of the target name: each target
// belongs to exactly one replica, every replica computes the same answer
// without talking to the others, and going from n to n+1 replicas moves only
// the targets the new replica wins, about 1/(n+1) of them.
package shard

import (
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"strings"

	"github.com/dbcanary/dbcanary/internal/config"
)

// Environment variables read by FromEnvironment.
const (
	EnvIndex = "DBCANARY_SHARD_INDEX"
	EnvCount = "DBCANARY_SHARD_COUNT"
)

// weight is the rendezvous score of (target, replica). The hash is part of the
// on-the-wire contract between replicas: changing it reshuffles every target,
// so replicas of different versions must not be mixed while it changes.
func weight(targetHash uint64, replica int) uint64 {
	return mix(targetHash ^ mix(uint64(replica)+1))
}

// mix is the splitmix64 finaliser: FNV alone is poorly mixed in its high
// bits, and the comparison of weights needs every bit to count.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func hashName(name string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return h.Sum64()
}

// Owner returns the replica, in [0, count), that probes target. A count
// below 2 means no sharding: replica 0 owns everything.
func Owner(target string, count int) int {
	if count < 2 {
		return 0
	}
	th := hashName(target)
	best, bestW := 0, weight(th, 0)
	for r := 1; r < count; r++ {
		if w := weight(th, r); w > bestW {
			best, bestW = r, w
		}
	}
	return best
}

// Select returns the targets replica index of count owns, in config order.
func Select(targets []config.Target, index, count int) []config.Target {
	var out []config.Target
	for _, t := range targets {
		if Owner(t.Name, count) == index {
			out = append(out, t)
		}
	}
	return out
}

// Validate checks that index names one of count replicas.
func Validate(index, count int) error {
	if count < 1 {
		return fmt.Errorf("shard count must be at least 1, got %d", count)
	}
	if index < 0 || index >= count {
		return fmt.Errorf("shard index %d is outside [0, %d)", index, count)
	}
	return nil
}

// Ordinal extracts a StatefulSet pod ordinal from a host name "name-N".
func Ordinal(hostname string) (int, bool) {
	// A FQDN (hostname -f style) carries the pod name in its first label.
	hostname, _, _ = strings.Cut(hostname, ".")
	i := strings.LastIndexByte(hostname, '-')
	if i <= 0 || i == len(hostname)-1 {
		return 0, false
	}
	digits := hostname[i+1:]
	// Atoi alone would accept a sign ("name-+3").
	if strings.TrimLeft(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil {
		return 0, false
	}
	return n, true
}

// Environment is where FromEnvironment found the replica's index and count.
type Environment struct {
	Index, Count         int
	IndexFrom, CountFrom string // "DBCANARY_SHARD_INDEX", "hostname", ... for logs
}

// FromEnvironment reads the shard index from $DBCANARY_SHARD_INDEX, else the
// StatefulSet ordinal at the end of the host name, and the count from
// $DBCANARY_SHARD_COUNT. Either is -1 (index) or 0 (count) when absent.
func FromEnvironment() (Environment, error) {
	return fromEnvironment(os.Getenv, os.Hostname)
}

func fromEnvironment(getenv func(string) string, hostname func() (string, error)) (Environment, error) {
	env := Environment{Index: -1}
	if v := getenv(EnvIndex); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return env, fmt.Errorf("%s=%q: not a non-negative integer", EnvIndex, v)
		}
		env.Index, env.IndexFrom = n, EnvIndex
	} else if h, err := hostname(); err == nil {
		if n, ok := Ordinal(h); ok {
			env.Index, env.IndexFrom = n, "hostname "+h
		}
	}
	if v := getenv(EnvCount); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return env, fmt.Errorf("%s=%q: not a positive integer", EnvCount, v)
		}
		env.Count, env.CountFrom = n, EnvCount
	}
	return env, nil
}
