// Package opensearch is the OpenSearch canary: it indexes pmc-like documents
// (generated from a vocabulary shipped with the code) into daily indices of
// its own, reads them back by id and compares every field, runs the three pmc
// query shapes (match_all, term, match_phrase) against a reference set whose
// hits are known in advance, and measures how long a document takes to
// become searchable (the refresh lag). See the README (OpenSearch probe).
package opensearch
