//go:build tools

// Package peers only names the binaries build.sh builds, so that `go mod tidy` keeps their modules.
package peers

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
