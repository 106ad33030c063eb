package codecheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function in the product may be, signature and closing brace
// included: past it, a function has seams worth splitting along (docs/development.md).
const maxFuncLines = 80

// productDirs are the trees the binary is built from, relative to the module root.
var productDirs = []string{"cmd", "internal", "probes"}

// funcLength is one function's name, place and length in lines.
type funcLength struct {
	name  string
	pos   token.Position
	lines int
}

// TestFunctionLength fails on every non-test function over maxFuncLines lines in productDirs,
// naming each with its length; with -v it also logs the ten longest.
func TestFunctionLength(t *testing.T) {
	var all []funcLength
	for _, dir := range productDirs {
		all = append(all, functionLengths(t, filepath.Join("..", "..", dir))...)
	}
	if len(all) == 0 {
		t.Fatal("no function found: the test runs from internal/codecheck and reads ../../cmd etc.")
	}
	sort.Slice(all, func(i, j int) bool { return all[i].lines > all[j].lines })
	t.Logf("%d functions, median %d lines", len(all), all[len(all)/2].lines)
	for i, f := range all[:min(10, len(all))] {
		t.Logf("%2d. %4d lines  %s (%s:%d)", i+1, f.lines, f.name, f.pos.Filename, f.pos.Line)
	}
	for _, f := range all {
		if f.lines > maxFuncLines {
			t.Errorf("%s:%d: %s is %d lines (limit %d): split it along its seams", f.pos.Filename, f.pos.Line, f.name, f.lines, maxFuncLines)
		}
	}
}

// functionLengths parses every non-test .go file under root and returns its top-level
// functions and methods with their lengths.
func functionLengths(t *testing.T, root string) []funcLength {
	t.Helper()
	var out []funcLength
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		file, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
			out = append(out, funcLength{name: funcName(fn), pos: start, lines: end.Line - start.Line + 1})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// funcName is fn's name as a reader searches for it: Recv.Method or Func.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	switch r := typ.(type) {
	case *ast.Ident:
		return r.Name + "." + fn.Name.Name
	case *ast.IndexExpr:
		if id, ok := r.X.(*ast.Ident); ok {
			return id.Name + "." + fn.Name.Name
		}
	case *ast.IndexListExpr:
		if id, ok := r.X.(*ast.Ident); ok {
			return id.Name + "." + fn.Name.Name
		}
	}
	return fn.Name.Name
}
