// Package rabbitmq is the AMQP 0-9-1 canary: it publishes persistent messages
// with publisher confirms into a queue of its own, consumes them back,
// verifies every body byte for byte and counts messages that never return.
// It follows the broker's connection.blocked notices (memory and disk alarms)
// so that a refused publish says why. It is the reference implementation of
// docs/adding-a-probe.md.
package rabbitmq
