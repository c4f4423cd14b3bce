// P12 of docs/performance.md: session.run('true') through the SDK against one
// bare fetch of the same route from the same Node process, measured in turn
// on one daemon built from the repository, printed in the table form of
// `go run ./bench`.
//
//   npm run bench [-- -quick] [-- -json file]

import { writeFile } from 'node:fs/promises'
import { cpus } from 'node:os'
import { performance } from 'node:perf_hooks'

import { startDaemon } from '../test/daemon.js'

const quick = process.argv.includes('-quick')
const jsonAt = process.argv.indexOf('-json')
const reps = quick ? 200 : 1000
const limit = 1.3

function quantile(s: number[], q: number): number {
  const c = [...s].sort((a, b) => a - b)
  const i = Math.round(q * c.length) - 1
  return c[Math.min(Math.max(i, 0), c.length - 1)]!
}

/** A duration in ms with three significant digits, as the Go bench prints it. */
function dur(ms: number): string {
  const g = (v: number): string => String(Number(v.toPrecision(3)))
  if (ms >= 1000) return `${g(ms / 1000)}s`
  if (ms >= 1) return `${g(ms)}ms`
  return `${g(ms * 1000)}µs`
}

function spread(s: number[]): number {
  const m = quantile(s, 0.5)
  return m === 0 ? 0 : (quantile(s, 0.75) - quantile(s, 0.25)) / m
}

async function main(): Promise<void> {
  const started = new Date()
  const d = await startDaemon()
  try {
    const sb = d.sandbox()
    const session = await sb.process.createSession()
    const url = `${d.url}/v1/sessions/${session.id}/commands/run`
    const headers = { authorization: `Bearer ${d.token}`, 'content-type': 'application/json' }
    const sdk = async (): Promise<void> => {
      const r = await session.run('true')
      if (r.reason !== 'exited' || r.exitCode !== 0) throw new Error(`run: ${JSON.stringify(r)}`)
    }
    const bare = async (): Promise<void> => {
      const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ cmd: 'true' }) })
      const body = (await res.json()) as { exitCode?: number }
      if (res.status !== 200 || body.exitCode !== 0) throw new Error(`fetch: ${res.status}`)
    }
    // Warm up both (connections, JIT), then alternate so both see the same load.
    for (let i = 0; i < 20; i++) {
      await sdk()
      await bare()
    }
    const sv: number[] = []
    const bv: number[] = []
    for (let i = 0; i < reps; i++) {
      let t = performance.now()
      await sdk()
      sv.push(performance.now() - t)
      t = performance.now()
      await bare()
      bv.push(performance.now() - t)
    }
    await session.delete()

    const ratio = quantile(sv, 0.5) / quantile(bv, 0.5)
    const row = {
      metric: 'P12',
      what: "session.run('true') through the TypeScript SDK against one bare fetch of the same route (median; p99)",
      value: `${dur(quantile(sv, 0.5))} (p99 ${dur(quantile(sv, 0.99))})`,
      baseline: `${dur(quantile(bv, 0.5))} (p99 ${dur(quantile(bv, 0.99))})`,
      ratio,
      target: `≤ ${limit}×`,
      met: ratio <= limit ? 'yes' : 'no',
      note: `n=${reps} each, interquartile spread ${Math.round(100 * spread(sv))}% / ${Math.round(100 * spread(bv))}%, ` +
        `p99 ratio ${(quantile(sv, 0.99) / quantile(bv, 0.5)).toFixed(3)}×`,
    }
    const elapsed = `${((Date.now() - started.getTime()) / 1000).toFixed(3)}s`
    const cells = [
      ['metric', 'value', 'baseline', 'ratio', 'target', 'met'],
      [row.metric, row.value, row.baseline, `${row.ratio.toFixed(3)}×`, row.target, row.met],
    ]
    const widths = cells[0]!.map((_, i) => Math.max(...cells.map((r) => [...r[i]!].length)))
    console.log(`conch bench  ${started.toISOString().replace(/\.\d+Z$/, 'Z')}  quick=${quick}  elapsed ${elapsed}`)
    console.log(`machine: ${cpus().length} cores, node ${process.version}, ${process.platform}/${process.arch}`)
    console.log()
    for (const r of cells) console.log(r.map((c, i) => c + ' '.repeat(widths[i]! - [...c].length + 2)).join(''))
    console.log()
    console.log(`${row.metric}  ${row.what}: ${row.note}`)
    if (jsonAt > 0 && process.argv[jsonAt + 1]) {
      const report = { time: started.toISOString(), quick, cores: cpus().length, node: process.version, rows: [row], elapsed }
      await writeFile(process.argv[jsonAt + 1]!, JSON.stringify(report, null, 2) + '\n')
    }
  } finally {
    await d.stop()
  }
}

await main()
