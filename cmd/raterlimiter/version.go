package main

import (
	"cmp"
	"runtime/debug"
	"strings"
)

// version is what -version prints and the start line logs: the module
// version the binary was built from, then, when the build recorded them,
// the VCS revision, its commit time and "+modified" for a tree with
// uncommitted changes, and the Go release. A build from a git checkout
// (go build records the checkout unless -buildvcs=false) shows which
// commit it is even without a tag; go install of a tagged release shows
// the tag.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	return buildVersion(bi)
}

// buildVersion is version for the build information bi.
func buildVersion(bi *debug.BuildInfo) string {
	vcs := map[string]string{}
	for _, s := range bi.Settings {
		vcs[s.Key] = s.Value
	}
	var extra []string
	if rev := vcs["vcs.revision"]; rev != "" {
		if vcs["vcs.modified"] == "true" {
			rev += "+modified"
		}
		extra = append(extra, "revision "+rev)
	}
	if at := vcs["vcs.time"]; at != "" {
		extra = append(extra, at)
	}
	if bi.GoVersion != "" {
		extra = append(extra, bi.GoVersion)
	}
	v := cmp.Or(bi.Main.Version, "(devel)")
	if len(extra) == 0 {
		return v
	}
	return v + " (" + strings.Join(extra, ", ") + ")"
}
