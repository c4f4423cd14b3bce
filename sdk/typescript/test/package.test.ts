import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { inspect } from 'node:util'
import { after, before, describe, test } from 'node:test'

import ts from 'typescript'

import { Sandbox } from '@conchsh/sdk'

import { type Daemon, startDaemon } from './daemon.js'

const packageRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..')

let d: Daemon

before(async () => {
  d = await startDaemon()
})
after(async () => d?.stop())

describe('what a new user meets first', () => {
  test('a sandbox never shows its bearer token', () => {
    const token = 'secret-token-that-must-not-show'
    const s = new Sandbox({ url: 'http://127.0.0.1:7070', token })
    for (const shown of [inspect(s, { depth: Infinity, showHidden: true }), inspect(s.transport, { showHidden: true }), JSON.stringify(s.transport)]) {
      assert.ok(!shown.includes(token), `the token shows: ${shown}`)
    }
    assert.equal(s.transport.token, token, 'the token is still there for who asks for it')
  })

  test('Sandbox.fromEnv with no daemon says what to start', async () => {
    const saved = { ...process.env }
    const empty = await mkdtemp(join(tmpdir(), 'conch-sdk-nodaemon-'))
    try {
      delete process.env.CONCH_URL
      delete process.env.CONCH_TOKEN
      process.env.XDG_STATE_HOME = empty
      await assert.rejects(Sandbox.fromEnv(), (err: Error) => {
        assert.match(err.message, /conch serve/)
        assert.match(err.message, /CONCH_URL/)
        assert.ok(err.message.includes(empty), err.message)
        return true
      })
    } finally {
      process.env = saved
      await rm(empty, { recursive: true, force: true })
    }
  })

  test("the README's JavaScript example runs as written in plain Node", async () => {
    const readme = await readFile(join(packageRoot, 'README.md'), 'utf8')
    const m = /```js\n([\s\S]*?)```/.exec(readme)
    assert.ok(m, 'the README has a js example')
    // A module inside the package, so that '@conchsh/sdk' resolves to it.
    const file = join(packageRoot, 'build', 'readme-example.mjs')
    await writeFile(file, m[1]!)
    const { stdout } = await promisify(execFile)(process.execPath, [file], {
      env: { ...process.env, CONCH_URL: d.url, CONCH_TOKEN: d.token },
      timeout: 60_000,
    })
    assert.match(stdout, /^exited 3 hi$/m)
    assert.match(stdout, /^test\n\/tmp\/conch-readme-demo$/m)
    assert.match(stdout, /tick 1\ntick 2\ntick 3\n/)
    assert.match(stdout, /^job: signaled INT$/m)
  })

  test("the repository README's TypeScript example compiles with the options it names and prints what it says", async () => {
    const readme = await readFile(join(packageRoot, '..', '..', 'README.md'), 'utf8')
    const m = /## A session from TypeScript\n[\s\S]*?```ts\n([\s\S]*?)```/.exec(readme)
    assert.ok(m, 'the README has a ts example under "A session from TypeScript"')
    // The compiler options are those the README gives, and nothing else
    // but where to find @types/node, which it says to install.
    const o = /## A session from TypeScript\n[\s\S]*?```json\n([\s\S]*?)```[\s\S]*?```ts\n/.exec(readme)
    assert.ok(o, 'the README gives the compilerOptions before its ts example')
    const named = ts.convertCompilerOptionsFromJson(JSON.parse(o[1]!), packageRoot)
    assert.deepEqual(named.errors.map((x) => ts.flattenDiagnosticMessageText(x.messageText, '\n')), [])
    const dir = join(packageRoot, 'build', 'readme-ts-example')
    await mkdir(dir, { recursive: true })
    const file = join(dir, 'main.ts')
    await writeFile(file, m[1]!)
    // Without @types/node, which the README says to install, it does not.
    assert.match(readme, /## A session from TypeScript\n[^#]*`@types\/node` installed/)
    const bare = ts.createProgram([file], { ...named.options, types: [], noEmit: true })
    const missing = ts.getPreEmitDiagnostics(bare).map((x) => ts.flattenDiagnosticMessageText(x.messageText, '\n'))
    assert.ok(missing.some((x) => /Cannot find name '(fetch|AbortSignal|Response)'/.test(x)), missing.join('\n'))
    const program = ts.createProgram([file], {
      ...named.options,
      typeRoots: [join(packageRoot, 'node_modules', '@types')],
    })
    const emitted = program.emit()
    const diagnostics = [...ts.getPreEmitDiagnostics(program), ...emitted.diagnostics]
    assert.deepEqual(diagnostics.map((x) => ts.flattenDiagnosticMessageText(x.messageText, '\n')), [])
    const { stdout } = await promisify(execFile)(process.execPath, [join(dir, 'main.js')], {
      env: { ...process.env, CONCH_URL: d.url, CONCH_TOKEN: d.token },
      timeout: 60_000,
    })
    assert.equal(stdout, '3 "mode test\\n"\n')
  })
})
