// Package opensearch is the opensearch canary probe (under construction).
package opensearch
