package codecheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// perTargetDirs hold code that logs through a per-target logger: the engine
// hands probes (probes.Target.Logger) and ledgers one that already carries
// the target and backend attributes.
var perTargetDirs = []string{"probes", "internal/ledger"}

// perTargetAttrs are the attributes such a logger already carries.
var perTargetAttrs = map[string]bool{"target": true, "backend": true}

// logMethods are the slog.Logger methods that take attributes.
var logMethods = map[string]bool{"Debug": true, "Info": true, "Warn": true, "Error": true, "Log": true, "With": true,
	"DebugContext": true, "InfoContext": true, "WarnContext": true, "ErrorContext": true}

// TestNoRepeatedLogAttrs fails on a log call in perTargetDirs that passes an
// attribute its logger already carries: the line would read
// `target=swift … target=swift`.
func TestNoRepeatedLogAttrs(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	for _, dir := range perTargetDirs {
		root := filepath.Join("..", "..", dir)
		if _, err := os.Stat(root); os.IsNotExist(err) {
			continue // the ledger may live under probes/
		}
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(file, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || !isLoggerCall(call) {
					return true
				}
				checked++
				for _, arg := range call.Args {
					if lit, ok := arg.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if key, _ := strconv.Unquote(lit.Value); perTargetAttrs[key] {
							t.Errorf("%s: log attribute %q repeats what the per-target logger carries", fset.Position(lit.Pos()), key)
						}
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked == 0 {
		t.Fatal("no logger call found: the test reads ../../probes from internal/codecheck")
	}
}

// isLoggerCall reports whether call is logger.M(...) or x.logger.M(...) for a log method M.
func isLoggerCall(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || !logMethods[sel.Sel.Name] {
		return false
	}
	switch x := sel.X.(type) {
	case *ast.Ident:
		return x.Name == "logger"
	case *ast.SelectorExpr:
		return x.Sel.Name == "logger"
	}
	return false
}
