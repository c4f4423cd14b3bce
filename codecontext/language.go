package codecontext

import (
	_ "embed"
	"fmt"
	"os/exec"
	"strings"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/process"
)

// Language is the language of a context.
type Language string

// The languages.
const (
	Python     Language = api.LanguagePython
	JavaScript Language = api.LanguageJavaScript
)

// ParseLanguage parses a language name: python, or javascript (node and js
// are the same). Others are an error wrapping process.ErrInvalidArgument.
func ParseLanguage(s string) (Language, error) {
	if l := api.CanonicalLanguage(s); l != "" {
		return Language(l), nil
	}
	return "", fmt.Errorf("%w: unknown language %s: use python or javascript", process.ErrInvalidArgument, api.Quote(string(s)))
}

//go:embed driver.py
var pythonDriver []byte

//go:embed driver.js
var nodeDriver []byte

// interpreter is how a language's driver is started.
type interpreter struct {
	lang       Language
	path       string
	driverName string
	driver     []byte
	flags      []string // before the driver's path
}

// findInterpreter looks for l's interpreter on PATH.
func findInterpreter(l Language) (interpreter, error) {
	var names []string
	in := interpreter{lang: l}
	switch l {
	case Python:
		names = []string{"python3", "python"}
		in.driverName, in.driver = "driver.py", pythonDriver
	case JavaScript:
		names = []string{"node", "nodejs"}
		in.driverName, in.driver = "driver.js", nodeDriver
		// The REPL's own rewrite of top-level await is internal to Node;
		// since Node 20.? a vm script's callback for import() works only
		// with vm modules enabled (see driver.js).
		in.flags = []string{"--expose-internals", "--no-memory-reducer", "--experimental-vm-modules"}
	default:
		return in, fmt.Errorf("%w: unknown language %s: use python or javascript", process.ErrInvalidArgument, api.Quote(string(l)))
	}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			in.path = p
			return in, nil
		}
	}
	return in, fmt.Errorf("%w: %s needs %s on PATH, and none was found: install it (Python 3.9 or later, Node 18 or later)",
		process.ErrInvalidArgument, l, strings.Join(names, " or "))
}
