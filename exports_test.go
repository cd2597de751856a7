package raterlimiter_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The exported surface, counted the way a reader of go doc meets it: each
// exported top-level name (const, var, type, func), each exported method
// of an exported type, each exported field of an exported struct and each
// method of an exported interface. Tests, main packages and internal/ are
// not counted; cmd/ is not part of the tree's count.
//
// The count is not the goal; an API that is easy to see is. What a user
// needs is a method of the type that owns it rather than a back door, so
// the packages a user imports may hold up to 160 names; the ceilings below
// hold the counts as they are, and only go down.
const (
	userCeiling = 160
	treeCeiling = 297
)

// userFacing lists the packages a Go user imports: the root vocabulary,
// the embedded limiter, the client, the middleware and the Redis backend.
func userFacing(rel string) bool {
	return rel == "." || rel == "memory" || rel == "client" || rel == "redisbackend" ||
		rel == "middleware" || strings.HasPrefix(rel, "middleware/")
}

// TestExportedSurface counts the exported identifiers per package, prints
// the table docs/architecture.md quotes, and fails when the user-facing
// packages or the whole tree grow past their ceilings.
func TestExportedSurface(t *testing.T) {
	counts := exportCounts(t, ".")
	var user, tree int
	pkgs := make([]string, 0, len(counts))
	for p := range counts {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, p := range pkgs {
		n := counts[p]
		mark := ""
		if userFacing(p) {
			user += n
			mark = " (user-facing)"
		}
		tree += n
		t.Logf("%-24s %4d%s", p, n, mark)
	}
	t.Logf("user-facing %d (ceiling %d), tree %d (ceiling %d)", user, userCeiling, tree, treeCeiling)
	require.LessOrEqual(t, user, userCeiling, "the packages a user imports export %d identifiers", user)
	require.LessOrEqual(t, tree, treeCeiling, "the tree outside internal/ and cmd/ exports %d identifiers", tree)
}

// exportCounts parses every non-test, non-main package under root, outside
// internal/, cmd/ and testdata/, and returns its exported identifier count
// keyed by its directory relative to root.
func exportCounts(t *testing.T, root string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
			name == "internal" || name == "testdata" || (path == filepath.Join(root, "cmd"))) {
			return filepath.SkipDir
		}
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, path, func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		for pname, pkg := range pkgs {
			if pname == "main" {
				continue
			}
			rel, _ := filepath.Rel(root, path)
			counts[filepath.ToSlash(rel)] += countExported(pkg)
		}
		return nil
	})
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("run from the module root: %v", err)
	}
	return counts
}

// countExported counts one package's exported identifiers.
func countExported(pkg *ast.Package) int {
	n := 0
	exportedTypes := map[string]bool{}
	for _, f := range pkg.Files {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range gd.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					n++
					exportedTypes[s.Name.Name] = true
					switch tt := s.Type.(type) {
					case *ast.StructType:
						n += exportedFields(tt.Fields)
					case *ast.InterfaceType:
						n += exportedFields(tt.Methods)
					}
				case *ast.ValueSpec:
					for _, id := range s.Names {
						if id.IsExported() {
							n++
						}
					}
				}
			}
		}
	}
	for _, f := range pkg.Files {
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || !fd.Name.IsExported() {
				continue
			}
			if fd.Recv == nil {
				n++
				continue
			}
			if exportedTypes[receiverType(fd.Recv.List[0].Type)] {
				n++
			}
		}
	}
	return n
}

// exportedFields counts the exported names in a struct's fields or an
// interface's methods; an embedded exported type counts once.
func exportedFields(fl *ast.FieldList) int {
	n := 0
	for _, f := range fl.List {
		if len(f.Names) == 0 {
			if id := embeddedName(f.Type); id != "" && ast.IsExported(id) {
				n++
			}
			continue
		}
		for _, id := range f.Names {
			if id.IsExported() {
				n++
			}
		}
	}
	return n
}

func embeddedName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.StarExpr:
		return embeddedName(x.X)
	case *ast.SelectorExpr:
		return x.Sel.Name
	}
	return ""
}

func receiverType(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return receiverType(x.X)
	case *ast.IndexExpr:
		return receiverType(x.X)
	case *ast.IndexListExpr:
		return receiverType(x.X)
	case *ast.Ident:
		return x.Name
	}
	return ""
}
