package api

import "strings"

// The languages of a code context, as the API names them.
const (
	LanguagePython     = "python"
	LanguageJavaScript = "javascript"
)

// CanonicalLanguage returns the API's name for a code context's language
// as a client may give it (python; javascript, node or js, in any case),
// or "" when it names none.
func CanonicalLanguage(s string) string {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "python":
		return LanguagePython
	case "javascript", "node", "js":
		return LanguageJavaScript
	}
	return ""
}
