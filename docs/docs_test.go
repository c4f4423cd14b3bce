// Package docs_test checks that the repository stands alone: what its
// documents and comments point at is in it, and what users are told about
// the promises, the performance figures and the licence is there.
package docs_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// root is the repository's root, seen from this package's directory.
const root = ".."

// sources walks the repository's documents and code, leaving out
// dependencies and build outputs.
func sources(t *testing.T, f func(path, text string)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "dist", "build", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".md", ".go", ".ts", ".js", ".py", ".sh", ".json":
		default:
			return nil
		}
		if filepath.Base(path) == "docs_test.go" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f(path, string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNoDocumentOutsideTheRepository: nothing names a design document that
// users cannot read, since none is in the repository.
func TestNoDocumentOutsideTheRepository(t *testing.T) {
	outside := regexp.MustCompile(`\b(BEHAVIOUR|PERFORMANCE|AGENTS|CODE|RELIABILITY|CONTAIN|FLEET|PYTHON|STYLE|SDK|API)\.md\b|seed's|reference page`)
	sources(t, func(path, text string) {
		for i, line := range strings.Split(text, "\n") {
			if m := outside.FindString(line); m != "" {
				t.Errorf("%s:%d names %q, which is not in the repository: %s", path, i+1, m, strings.TrimSpace(line))
			}
		}
	})
}

// TestLinksResolve: every relative link of a Markdown document names a
// file or directory of the repository.
func TestLinksResolve(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	sources(t, func(path, text string) {
		if filepath.Ext(path) != ".md" {
			return
		}
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(path), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", path, target)
			}
		}
	})
}

// TestPerformanceFigures: docs/performance.md gives every figure, P0 to P16
// and P5b, with its baseline, target and how it is measured, and every
// figure that go run ./bench measures is among them.
func TestPerformanceFigures(t *testing.T) {
	b, err := os.ReadFile("performance.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) == 7 && regexp.MustCompile(`^ P\d+b? $`).MatchString(cells[1]) {
			rows[strings.TrimSpace(cells[1])] = line
			for i, c := range cells[2:6] {
				if strings.TrimSpace(c) == "" {
					t.Errorf("%s: column %d is empty", strings.TrimSpace(cells[1]), i+2)
				}
			}
		}
	}
	want := []string{"P5b"}
	for i := 0; i <= 16; i++ {
		want = append(want, "P"+strconv.Itoa(i))
	}
	for _, p := range want {
		if rows[p] == "" {
			t.Errorf("docs/performance.md has no row for %s", p)
		}
	}
	main, err := os.ReadFile(filepath.Join(root, "bench", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`\{(?:name: )?"(P\d+b?)", `).FindAllStringSubmatch(string(main), -1) {
		if rows[m[1]] == "" {
			t.Errorf("go run ./bench measures %s, which docs/performance.md does not describe", m[1])
		}
	}
}

// TestPromisesNumbered: docs/behaviour.md holds every promise the tests and
// the shell matrix refer to by number, 1 to 41, each once.
func TestPromisesNumbered(t *testing.T) {
	b, err := os.ReadFile("behaviour.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^(\d+)\. \*\*`).FindAllStringSubmatch(string(b), -1) {
		seen[m[1]]++
	}
	for i := 1; i <= 41; i++ {
		if seen[strconv.Itoa(i)] != 1 {
			t.Errorf("promise %d appears %d times in docs/behaviour.md", i, seen[strconv.Itoa(i)])
		}
	}
}

// TestLicence: the licence is in the repository and the SDK's package says
// which it is.
func TestLicence(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "Apache License") || !strings.Contains(string(b), "Version 2.0") {
		t.Error("LICENSE is not the Apache License 2.0")
	}
	var pkg struct {
		License string `json:"license"`
	}
	b, err = os.ReadFile(filepath.Join(root, "sdk", "typescript", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatal(err)
	}
	if pkg.License != "Apache-2.0" {
		t.Errorf("sdk/typescript/package.json: license %q, want Apache-2.0", pkg.License)
	}
}
