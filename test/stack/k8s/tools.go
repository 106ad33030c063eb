//go:build tools

// Package tools pins the Kubernetes commands test/stack/k8s.sh builds: one
// module so the staging modules (k8s.io/api, ...) resolve at the release's
// own v0.x through the replace block in go.mod.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
