// Package s3 is the s3 canary probe (under construction).
package s3
