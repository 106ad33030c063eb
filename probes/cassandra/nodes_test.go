package cassandra

import (
	"io"
	"net"
	"testing"
)

// A connection counts as its node's once the node answered a whole frame
// header, and no longer once it ends (read error or Close), once only.
func TestConnTrack(t *testing.T) {
	track := newConnTrack()
	const node = "10.0.0.12:9042"
	open := func() (*frameGuard, net.Conn) {
		client, server := net.Pipe()
		return &frameGuard{Conn: client, track: track, node: node}, server
	}
	g, server := open()
	go func() { _, _ = server.Write([]byte{0x84, 0, 0, 0, 2, 0, 0}) }() // 7 of a READY's 9 header bytes
	buf := make([]byte, 64)
	if _, err := g.Read(buf); err != nil {
		t.Fatal(err)
	}
	if track.connected(node) {
		t.Fatal("counted before a whole frame header")
	}
	go func() { _, _ = server.Write([]byte{0, 0}) }()
	if _, err := g.Read(buf); err != nil {
		t.Fatal(err)
	}
	if !track.connected(node) {
		t.Fatal("not counted after the node answered")
	}
	g2, server2 := open() // a second connection that never answers
	_ = server2.Close()
	if _, err := g2.Read(buf); err != io.EOF {
		t.Fatalf("read of a closed pipe: %v", err)
	}
	if !track.connected(node) {
		t.Fatal("a connection that never answered uncounted the one that did")
	}
	_ = server.Close()
	if _, err := g.Read(buf); err == nil {
		t.Fatal("read after the node closed: no error")
	}
	_ = g.Close()
	if track.connected(node) || len(track.open) != 0 {
		t.Fatalf("still counted after the connection ended: %v", track.open)
	}
}
