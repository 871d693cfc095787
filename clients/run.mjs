// Runs every clients/tests/*.test.mjs with node:test's run(), prints each
// test's result as it ends, then one summary line in pytest's format:
//
//   ===== 41 passed, 0 failed in 12.34s =====
//
// Exits 1 when a test failed, when a test file failed outside its tests
// (it did not load, say), or when no test ran at all.
//
//   node clients/run.mjs [file-or-name-filter …]
import { run } from 'node:test'
import { readdirSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { inspect } from 'node:util'

const here = dirname(fileURLToPath(import.meta.url))
const testsDir = join(here, 'tests')
const filters = process.argv.slice(2)
const files = readdirSync(testsDir)
  .filter((name) => name.endsWith('.test.mjs'))
  .filter((name) => filters.length === 0 || filters.some((f) => name.includes(f)))
  .sort()
  .map((name) => join(testsDir, name))

const started = performance.now()
const counts = { passed: 0, failed: 0, skipped: 0 }
const failures = []
// Names of the suites a test is in, by nesting level, per file.
const suitePath = new Map()

const isFileEvent = (data) => data.nesting === 0 && files.includes(data.name)

const label = (data) => {
  const file = relative(here, data.file ?? data.name)
  if (isFileEvent(data)) return `${file} (the file itself)`
  const path = suitePath.get(data.file) ?? []
  return [file, ...path.slice(0, data.nesting), data.name].join(' › ')
}

const describeError = (error) => {
  // node:test wraps what a test threw; show the original, with its diff,
  // without the test runner's own stack frames.
  const cause = error?.cause ?? error
  let text
  if (typeof cause === 'string') text = cause
  else if (cause instanceof Error && cause.stack) text = cause.stack
  else text = inspect(cause, { depth: 4, colors: false })
  return text
    .split('\n')
    .filter((line) => !/^\s+at .*\bnode:/.test(line))
    .map((line) => `    ${line}`)
    .join('\n')
}

// One file at a time: the tests share one live service (and its two cores).
const stream = run({ files, concurrency: false, timeout: 180_000 })

for await (const event of stream) {
  const { type, data } = event
  if (type === 'test:start') {
    const path = suitePath.get(data.file) ?? []
    path.length = data.nesting
    path[data.nesting] = data.name
    suitePath.set(data.file, path)
    continue
  }
  if (type === 'test:stdout' || type === 'test:stderr') {
    process[type === 'test:stdout' ? 'stdout' : 'stderr'].write(data.message)
    continue
  }
  if (type !== 'test:pass' && type !== 'test:fail') {
    continue
  }
  const isFile = isFileEvent(data)
  const isSuite = data.details?.type === 'suite'
  const ms = data.details?.duration_ms ?? 0
  if (type === 'test:pass') {
    // A file or a suite that passed is not a test of its own.
    if (isFile || isSuite) continue
    if (data.skip !== undefined || data.todo !== undefined) {
      counts.skipped++
      console.log(`SKIP  ${label(data)}`)
    } else {
      counts.passed++
      console.log(`PASS  ${label(data)} (${Math.round(ms)} ms)`)
    }
    continue
  }
  // A suite fails when one of its tests did (already counted), or when one
  // of its hooks did: that one counts. A file fails when it did not load or
  // broke outside its tests: that counts too.
  const error = data.details?.error
  if (isSuite && error?.failureType === 'subtestsFailed') continue
  if (isFile && error?.failureType === 'subtestsFailed') continue
  counts.failed++
  failures.push(label(data))
  console.log(`FAIL  ${label(data)} (${Math.round(ms)} ms)`)
  console.log(describeError(error))
}

const seconds = ((performance.now() - started) / 1000).toFixed(2)
if (failures.length > 0) {
  console.log('\nFailed:')
  for (const name of failures) console.log(`  ${name}`)
}
const parts = [`${counts.passed} passed`, `${counts.failed} failed`]
if (counts.skipped > 0) parts.push(`${counts.skipped} skipped`)
if (files.length === 0) console.log(`no test file matched in ${relative(process.cwd(), testsDir) || '.'}`)
console.log(`===== ${parts.join(', ')} in ${seconds}s =====`)
process.exitCode = counts.failed > 0 || counts.passed === 0 ? 1 : 0
