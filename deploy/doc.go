// Package deploy holds the deployment examples and the monitoring kit
// (Dockerfile, systemd unit, Kubernetes pod, Prometheus alert rules, Grafana
// dashboard); its tests check them with the real tools (promtool,
// systemd-analyze) and build what the Dockerfile builds.
package deploy
