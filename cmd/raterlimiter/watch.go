package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watchSettle is how long the files must stay quiet after a change before
// they are read again. Each event starts it anew, so a file written in
// place in several steps (an editor's save, a copy over a slow link, a
// script that writes a policy at a time) is read once it is whole, as
// long as no step pauses for this long; the kubelet's swap of a ConfigMap
// is several events within milliseconds, read once. Writing by rename
// (docs/gateways.md) needs no pause at all.
const watchSettle = time.Second

// kubeletData is the symlink a Kubernetes ConfigMap or Secret volume swaps
// atomically on update: each file in the volume is a symlink through it.
const kubeletData = "..data"

// watchSet maps a directory to watch to the entry names in it whose change
// matters; a nil set means every name.
type watchSet map[string]map[string]bool

func (ws watchSet) add(dir, name string) {
	names, ok := ws[dir]
	if ok && names == nil {
		return // already every name
	}
	if name == "" {
		ws[dir] = nil
		return
	}
	if names == nil {
		names = map[string]bool{}
		ws[dir] = names
	}
	names[name] = true
}

// addTargets adds to ws what to watch so that a change of path is seen
// however it is made: an edit in place or a rename over it (the file's
// directory), a change of a file in it (a directory itself), a ConfigMap's
// swap of "..data", and a swap of any symlink on the way to it (its parent
// directory), which is how envoyproxy/ratelimit's runtime root and a
// ConfigMap mounted as a directory are updated. Symlinks are followed, so
// the target's directory is watched too.
func (ws watchSet) addTargets(path string) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return
	}
	addPath := func(p string) {
		dir, base := filepath.Split(p)
		dir = filepath.Clean(dir)
		ws.add(dir, base)
		ws.add(dir, kubeletData)
		// The directory's own parent sees it deleted and made again (a
		// redeploy that replaces the configuration's directory): its
		// watch went with it, and is made anew.
		if parent := filepath.Dir(dir); parent != dir {
			ws.add(parent, filepath.Base(dir))
		}
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			ws.add(p, "")
		}
	}
	addPath(abs)
	// Every symlink on the way: its swap changes what path names.
	for p := abs; ; {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			ws.add(filepath.Dir(p), filepath.Base(p))
		}
		parent := filepath.Dir(p)
		if parent == p {
			break
		}
		p = parent
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		addPath(real)
	}
}

// watchFiles calls changed, from a goroutine of its own, after any of paths
// changes (its contents, its permissions, a rename over it, its directory
// deleted and made again) and then stays unchanged for watchSettle, until
// ctx ends. What is watched is worked out again after each change, since
// a swapped symlink may now lead elsewhere; working it out stats the
// paths, which is abandoned after fileTimeout (a hung mount) and keeps
// what was watched. It returns an error only when the system's watcher
// cannot be made; a directory that cannot be watched is logged and skipped
// (SIGHUP still reloads).
func watchFiles(ctx context.Context, paths []string, logger *slog.Logger, changed func()) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	var want watchSet
	var stats fileLoads
	rewatch := func() {
		ws, err := loadFile(&stats, strings.Join(paths, ", "), func() (watchSet, error) {
			ws := watchSet{}
			for _, p := range paths {
				ws.addTargets(p)
			}
			return ws, nil
		})
		if err != nil {
			logger.Warn("what to watch for changes not worked out; watching what was", "err", err)
			return
		}
		want = ws
		for _, dir := range w.WatchList() {
			if _, ok := want[dir]; !ok {
				_ = w.Remove(dir)
			}
		}
		// Every time: a directory deleted and made again lost its watch
		// (fsnotify forgets it), and adding a watched one changes nothing.
		for dir := range want {
			if err := w.Add(dir); err != nil {
				logger.Warn("not watching a directory for changes; SIGHUP still reloads", "dir", dir, "err", err)
			}
		}
	}
	rewatch()
	go func() {
		defer w.Close()
		settle := time.NewTimer(time.Hour)
		settle.Stop()
		for {
			select {
			case <-ctx.Done():
				settle.Stop()
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if relevant(want, ev) {
					settle.Reset(watchSettle)
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				logger.Warn("watching files for changes", "err", err)
			case <-settle.C:
				rewatch()
				changed()
			}
		}
	}()
	return nil
}

// relevant reports whether ev names an entry that matters in its directory.
// A change of permissions is one: a file renamed over with mode 000 loads
// once it is made readable.
func relevant(want watchSet, ev fsnotify.Event) bool {
	dir, base := filepath.Split(ev.Name)
	names, ok := want[filepath.Clean(dir)]
	if !ok {
		return false
	}
	if names == nil {
		// A directory of configuration files: a change of a file the
		// loader reads (*.yaml, *.yml), or the kubelet's swap. Editors'
		// temporaries arrive as a rename later; other files beside them
		// (a snapshot, a backup) are never read, so reload nothing.
		if base == kubeletData {
			return true
		}
		ext := filepath.Ext(base)
		return !strings.HasPrefix(base, ".") && (ext == ".yaml" || ext == ".yml")
	}
	return names[base]
}

// onReload calls reload(why) on every SIGHUP and, with watch, whenever one
// of paths (each a file a flag names, never empty) changes, until ctx
// ends. A signal and a change never reload at the same time.
func onReload(ctx context.Context, logger *slog.Logger, watch bool, paths []string, reload func(why string)) {
	var mu sync.Mutex
	once := func(why string) {
		mu.Lock()
		defer mu.Unlock()
		reload(why)
	}
	// A channel of each caller's own: os/signal delivers a signal to every
	// channel registered for it, so the policies, the certificate and the
	// RLS configuration all reload on one SIGHUP.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				once("SIGHUP")
			}
		}
	}()
	if !watch {
		return
	}
	if err := watchFiles(ctx, paths, logger, func() { once("file changed") }); err != nil {
		logger.Warn("cannot watch files for changes; SIGHUP still reloads", "files", paths, "err", err)
	}
}
