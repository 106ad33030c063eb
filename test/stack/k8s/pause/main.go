// Command pause is the pod sandbox's only process in test/stack/k8s.sh's
// cluster: it holds the pod's namespaces and exits on SIGTERM or SIGINT, like
// registry.k8s.io/pause, which no registry here can serve.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
