// Package s3 is the S3 canary for any S3-compatible store (AWS, MinIO, Ceph
// RGW, OVH/Swift S3). For each configured object size it puts objects with
// deterministic content under the instance's own key prefix, gets them back
// (timing the first and the last byte separately) and compares every byte,
// heads and deletes them, and lists the prefix. It keeps a bounded set of
// live objects per size, deletes what it wrote, and asks the bucket to expire
// its prefix after a day in case it dies.
package s3
