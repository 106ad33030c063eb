// Package cassandra is the cassandra canary probe (under construction).
package cassandra
