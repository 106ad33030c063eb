// Package docs_test checks the repository's Markdown: every relative link and
// image of README.md and docs/ resolves to a file of the repository (and to a
// heading, for a #fragment into a Markdown page), and the README stays short
// enough to read in one sitting.
package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// maxReadmeBytes is the README's budget: what it is, the two commands, two
// pictures, the shortest config and one link per topic; the rest is in docs/.
const maxReadmeBytes = 20_000

// repoRoot is the repository, one level above this package.
const repoRoot = ".."

func TestReadmeSize(t *testing.T) {
	fi, err := os.Stat(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > maxReadmeBytes {
		t.Errorf("README.md is %d bytes, over its budget of %d: move the detail to a page under docs/ and link it", fi.Size(), maxReadmeBytes)
	}
}

// TestLinksResolve fails on a link or image to a file that is not in the
// repository, or to a #fragment that no heading of the page produces.
func TestLinksResolve(t *testing.T) {
	pages := markdownPages(t)
	anchors := map[string]map[string]bool{}
	for _, p := range pages {
		for _, l := range links(t, p) {
			target, fragment, _ := strings.Cut(l.target, "#")
			file := p
			if target != "" {
				file = filepath.Join(filepath.Dir(p), filepath.FromSlash(target))
				rel, err := filepath.Rel(repoRoot, file)
				if err != nil || strings.HasPrefix(rel, "..") {
					t.Errorf("%s:%d: %s points outside the repository", shortName(p), l.line, l.target)
					continue
				}
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s:%d: %s: no such file in the repository", shortName(p), l.line, l.target)
					continue
				}
			}
			if fragment == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			if anchors[file] == nil {
				anchors[file] = headingAnchors(t, file)
			}
			if !anchors[file][fragment] {
				t.Errorf("%s:%d: %s: %s has no heading with the anchor #%s", shortName(p), l.line, l.target, shortName(file), fragment)
			}
		}
	}
}

// markdownPages are README.md and every Markdown page under docs/.
func markdownPages(t *testing.T) []string {
	t.Helper()
	pages := []string{filepath.Join(repoRoot, "README.md")}
	err := filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return pages
}

func shortName(path string) string {
	rel, err := filepath.Rel(repoRoot, path)
	if err != nil {
		return path
	}
	return filepath.ToSlash(rel)
}

type link struct {
	line   int
	target string
}

var (
	// linkRE matches an inline link or image, [text](target) or ![alt](target "title").
	linkRE = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// codeSpanRE matches inline code, whose brackets are not links.
	codeSpanRE = regexp.MustCompile("`[^`]*`")
	// schemeRE matches a target with a URL scheme (https:, mailto:, ...).
	schemeRE = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// links returns the relative link targets of a page, outside code blocks and
// inline code.
func links(t *testing.T, path string) []link {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []link
	inFence := false
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		line = codeSpanRE.ReplaceAllString(line, "")
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			if !schemeRE.MatchString(m[1]) {
				out = append(out, link{line: i + 1, target: m[1]})
			}
		}
	}
	return out
}

var (
	headingRE  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	htmlIDRE   = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	mdLinkRE   = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTagRE  = regexp.MustCompile(`<[^>]+>`)
	emphasisRE = regexp.MustCompile("[*`]")
)

// headingAnchors returns the fragments GitHub gives a page's headings
// (lower case, punctuation dropped, spaces to hyphens, -1, -2 for repeats)
// and any explicit <a id="..."> anchors.
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range htmlIDRE.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := slugify(m[1])
		if n := seen[slug]; n > 0 {
			anchors[slug+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

// slugify is GitHub's heading anchor: the text of the heading, lower case,
// with only letters, digits, hyphens, underscores and spaces (as hyphens) kept.
func slugify(heading string) string {
	heading = mdLinkRE.ReplaceAllString(heading, "$1")
	heading = htmlTagRE.ReplaceAllString(heading, "")
	heading = emphasisRE.ReplaceAllString(heading, "")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
