// Package s3 is the S3 canary for any S3-compatible store (AWS, MinIO, Ceph
// RGW, OVH/Swift S3). For each configured object size it puts objects with
// deterministic content under the instance's own key prefix, gets them back
// (timing the first and the last byte separately) and compares every byte,
// heads and deletes them, and lists the prefix. Each process writes under a
// prefix of its own with a heartbeat object; it keeps a bounded set of live
// objects per size, deletes what it wrote at Close, collects the objects of
// processes whose heartbeat is older than abandoned_after (gc.go), and asks
// the bucket to expire the prefix after a day. See docs/s3.md.
package s3
