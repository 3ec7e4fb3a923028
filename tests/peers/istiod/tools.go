//go:build tools

// Package istiod only names the binary build.sh builds, so that `go mod tidy` keeps its module.
package istiod

import (
	_ "istio.io/istio/pilot/cmd/pilot-discovery"
)
