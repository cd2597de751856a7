// Package deploy holds the deployment examples and the monitoring kit
// (Dockerfile, systemd unit, Prometheus alert rules, Grafana dashboard);
// its tests check them with the real tools (promtool, systemd-analyze) and
// build what the Dockerfile builds. The Kubernetes manifests
// (deploy/kubernetes) and the Helm chart (deploy/helm/raterlimiter) are
// tested by the module in deploy/kubernetes/check, which keeps the
// Kubernetes API types out of this module.
package deploy
