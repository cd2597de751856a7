package raterlimiter_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestImportsAreGrouped: every Go file of the repository (the lab's and
// the Kubernetes check module's too) imports in at most three groups, in
// this order, each apart from the next by a blank line: the standard
// library, other modules, this module.
func TestImportsAreGrouped(t *testing.T) {
	const self = "github.com/raterlimiter/raterlimiter"
	kind := func(path string) int {
		switch {
		case path == self || strings.HasPrefix(path, self+"/"):
			return 2
		case strings.Contains(strings.SplitN(path, "/", 2)[0], "."):
			return 1
		}
		return 0
	}
	names := [...]string{"the standard library", "other modules", "this module"}
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		files++
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		prevKind, prevLine := -1, 0
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			k, line := kind(p), fset.Position(imp.Pos()).Line
			if imp.Doc != nil {
				line = fset.Position(imp.Doc.Pos()).Line
			}
			newGroup := prevLine != 0 && line > prevLine+1
			switch {
			case prevKind == -1:
			case k < prevKind:
				t.Errorf("%s: %s (%s) comes after %s", path, p, names[k], names[prevKind])
			case k == prevKind && newGroup:
				t.Errorf("%s: %s starts a second group of %s", path, p, names[k])
			case k > prevKind && !newGroup:
				t.Errorf("%s: %s (%s) is in the group of %s", path, p, names[k], names[prevKind])
			}
			prevKind, prevLine = k, fset.Position(imp.End()).Line
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, files, 100, "the walk found too few Go files")
}
