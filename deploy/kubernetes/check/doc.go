// Package check tests the Kubernetes manifests of deploy/kubernetes and the
// Helm chart of deploy/helm/raterlimiter: every document decodes strictly
// into the k8s.io/api types (and the Prometheus Operator's), the shapes
// hold what a deployment needs (native sidecar, probes, metrics, no root),
// and the sidecar itself, built from the repository, runs with the flags,
// environment, files and probe commands they give it.
//
// It is a module of its own so that the Kubernetes API types stay out of
// the main module's dependencies; .ci/run runs its tests beside the main
// module's.
package check
