package codecontext

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDynamicImport: import() in a JavaScript cell loads a node: builtin, a
// module by a path relative to the context's current directory (which
// follows process.chdir), by an absolute path, and an ESM-only package from
// node_modules, a JSON module with its import attribute, also from a function a cell defined and a later cell calls.
func TestDynamicImport(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		path := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	}
	write("m.mjs", "export const x = 42;\n")
	write("d.json", `{"z": 7}`)
	write("sub/n.mjs", "export const y = 'abs';\n")
	write("node_modules/esmonly/package.json", `{"name":"esmonly","type":"module","exports":{"import":"./i.js"}}`)
	write("node_modules/esmonly/i.js", "export default 'esm only';\n")
	c := newContext(t, Options{Language: JavaScript, Cwd: dir})
	for _, tc := range []struct{ code, out string }{
		{`const { setTimeout: wait } = await import("node:timers/promises"); await wait(1, "waited")`, "'waited'\n"},
		{`(await import("./m.mjs")).x`, "42\n"},
		{`(await import(` + "`" + dir + "/sub/n.mjs`" + `)).y`, "'abs'\n"},
		{`(await import("esmonly")).default`, "'esm only'\n"},
		{`(await import("./d.json", { with: { type: "json" } })).default.z`, "7\n"},
		{`globalThis.later = () => import("../m.mjs"); process.chdir("sub"); (await import("./n.mjs")).y`, "'abs'\n"},
		{`(await later()).x`, "42\n"},
	} {
		r, out, errOut := run(t, c, tc.code)
		require.Equal(t, 0, code(r), "%s: %s", tc.code, errOut)
		require.Equal(t, tc.out, out, tc.code)
		require.Empty(t, errOut, tc.code)
	}
	r, _, errOut := run(t, c, `await import("./missing.mjs")`)
	require.Equal(t, 1, code(r))
	require.Contains(t, errOut, "ERR_MODULE_NOT_FOUND")
	require.NotContains(t, errOut, "driver")
}
