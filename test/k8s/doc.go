// Package k8s runs dbcanary as pods on a real single-node Kubernetes started
// by test/stack/k8s.sh (issue 28, docs/evidence/kubernetes.md): the Helm
// chart's modes installed, tested (helm test), upgraded and rolled back with
// helm, the kustomize base and the sidecar example applied with kubectl, every
// object accepted by a real API server (with prometheus-operator's CRDs), every
// pod Ready under the kubelet with the shipped securityContext and resources,
// the PodDisruptionBudget refusing an eviction, the sharded StatefulSet's
// replicas each probing their share, the durability ledger kept across a pod
// deletion on a PersistentVolume (modes sharded and deployment), and the
// chart's ServiceMonitor and the sidecar's PodMonitor scraped and paging
// through prometheus-operator.
//
// The tests carry the build tag integration and run only with DBCANARY_K8S=1
// (`make test-k8s`, part of make test-compat): without it the package runs no
// test and says so, so that make test's integration run passes over it.
//
//	DBCANARY_K8S=1 go test -tags integration -count=1 -v -timeout 40m ./test/k8s/
package k8s
