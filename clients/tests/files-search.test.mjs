// @botpress/client on the runtime API: searchFiles over an uploaded, indexed
// document (the passage holding the answer first, found by its words or by
// its meaning; tags filters as the client sends them, context, breadcrumbs,
// consolidation), listFileTags and listFileTagValues with their iterators,
// and bad input.
import { describe, it, before } from 'node:test'
import assert from 'node:assert/strict'
import { InvalidQueryError, PayloadTooLargeError } from '@botpress/client'
import { runtimeClient, unique, ID, TIMESTAMP, waitFor, rejectsWith } from './helpers.mjs'

const HANDBOOK = `# Staff handbook

## Holidays

Every employee gets twenty-five vacation days a year.

Unused vacation days carry over until the end of March.

## Expenses

Travel expenses are reimbursed within ten working days of a claim.

Receipts must be attached to every expense claim.

## Equipment

Laptops are encrypted and must be locked when unattended.

Broken monitors are replaced by the facilities desk on the second floor.
`

// Questions, and a phrase of the passage that answers each.
const QUESTIONS = [
  ['How many vacation days does an employee get?', 'twenty-five vacation days'],
  ['When are travel expenses reimbursed?', 'reimbursed within ten working days'],
  ['What must be attached to an expense claim?', 'Receipts must be attached'],
  ['Who replaces a broken monitor?', 'facilities desk'],
  ['Do unused vacation days carry over?', 'carry over until the end of March'],
]
// Questions that share no word with their answer: found by meaning
// (semantic search, which the live service runs).
const PARAPHRASES = [
  ['How much paid time off do workers receive?', 'twenty-five vacation days'],
  ['protecting computers', 'Laptops are encrypted'],
  ['Will the company pay back my trip costs?', 'Travel expenses are reimbursed'],
]

const client = runtimeClient('developer')

describe('searchFiles and file tags', { timeout: 90_000 }, () => {
  const suite = unique('search')
  let file
  let other

  before(async () => {
    const uploaded = await client.uploadFile({
      key: `${suite}/handbook.md`,
      content: HANDBOOK,
      index: true,
      tags: { suite, team: 'hr' },
    })
    other = (
      await client.uploadFile({
        key: `${suite}/notes.md`,
        content: '# Notes\n\nThe vacation calendar lives on the intranet.\n',
        index: true,
        tags: { suite, team: 'it' },
      })
    ).file
    for (const id of [uploaded.file.id, other.id]) {
      await waitFor(
        () => client.getFile({ id }).then((r) => r.file),
        (f) => ['indexing_completed', 'indexing_failed'].includes(f.status),
        { timeoutMs: 45_000, intervalMs: 300, what: 'indexing' }
      )
    }
    file = (await client.getFile({ id: uploaded.file.id })).file
    assert.equal(file.status, 'indexing_completed', file.failedStatusReason)
  })

  for (const [question, answer] of [...QUESTIONS, ...PARAPHRASES]) {
    it(`answers “${question}” with the passage holding it first`, async () => {
      const { passages } = await client.searchFiles({ query: question, tags: { suite }, contextDepth: 0 })
      assert.ok(passages.length > 0)
      assert.ok(passages[0].content.includes(answer), passages[0].content)
      assert.equal(passages[0].file.id, file.id)
    })
  }

  it('answers the hosted shape', async () => {
    const { passages } = await client.searchFiles({ query: 'vacation days', tags: { suite } })
    const [first] = passages
    assert.deepEqual(Object.keys(first).sort(), ['content', 'file', 'meta', 'score'])
    assert.equal(typeof first.score, 'number')
    assert.ok(passages.every((p, i) => i === 0 || p.score <= passages[i - 1].score))
    assert.equal(first.meta.type, 'chunk')
    assert.equal(typeof first.meta.position, 'number')
    assert.deepEqual(Object.keys(first.file).sort(), ['contentType', 'createdAt', 'id', 'key', 'metadata', 'tags', 'updatedAt'])
    assert.match(first.file.id, ID('file'))
    assert.match(first.file.createdAt, TIMESTAMP)
  })

  it('filters by tags: a value, any of several, and a value excluded', async () => {
    const keys = async (tags) =>
      [...new Set((await client.searchFiles({ query: 'vacation', tags: { suite, ...tags } })).passages.map((p) => p.file.id))].sort()
    assert.deepEqual(await keys({ team: 'hr' }), [file.id])
    assert.deepEqual(await keys({ team: ['hr', 'it'] }), [file.id, other.id].sort())
    assert.deepEqual(await keys({ team: { not: 'hr' } }), [other.id])
    assert.deepEqual(await keys({ team: 'nobody' }), [])
  })

  it('gives the context around a passage and its breadcrumb', async () => {
    const { passages } = await client.searchFiles({
      query: 'Receipts attached expense claim',
      tags: { suite, team: 'hr' },
      contextDepth: 1,
      withContext: true,
      includeBreadcrumb: true,
      limit: 1,
    })
    const [hit] = passages
    assert.equal(passages.length, 1)
    assert.ok(hit.content.startsWith('Staff handbook > Expenses\n'), hit.content)
    assert.deepEqual(
      hit.context.map((c) => [c.type, c.offset]),
      [['breadcrumb', undefined], ['preceding', -1], ['current', 0], ['subsequent', 1]]
    )
    assert.ok(hit.context[2].text.includes('Receipts must be attached'))
    assert.match(hit.context[2].id, ID('psg'))
  })

  it('consolidates the matches of a file into one passage', async () => {
    const { passages } = await client.searchFiles({
      query: 'vacation expenses',
      tags: { suite },
      contextDepth: 0,
      consolidate: true,
    })
    assert.deepEqual(passages.map((p) => p.file.id).sort(), [file.id, other.id].sort())
    const handbook = passages.find((p) => p.file.id === file.id)
    assert.equal(handbook.meta.type, 'consolidated')
    assert.ok(handbook.content.startsWith('Staff handbook\nHolidays\n'), handbook.content)
    assert.ok(handbook.content.indexOf('Holidays') < handbook.content.indexOf('Expenses'))
  })

  it('lists the tags of the bot’s files and a tag’s values', async () => {
    const tags = await client.list.fileTags({}).collect()
    assert.ok(tags.includes('suite') && tags.includes('team'), tags)
    assert.deepEqual([...tags].sort(), tags)
    const values = await client.list.fileTagValues({ tag: 'suite' }).collect()
    assert.ok(values.includes(suite))
    const paged = await client.listFileTagValues({ tag: 'team', pageSize: 1 })
    assert.equal(paged.values.length, 1)
    assert.ok(paged.meta.nextToken)
  })

  it('refuses bad input in the one error body', async () => {
    await rejectsWith(client.searchFiles({ query: '' }), InvalidQueryError, 400)
    await rejectsWith(client.searchFiles({ query: 'x'.repeat(2_001) }), InvalidQueryError, 400)
    // Past the request line's limit (HTTP_MAX_REQUEST_LINE, 8 KiB), before any
    // view: 414 on the wire, of type PayloadTooLarge, whose class says 413.
    await rejectsWith(client.searchFiles({ query: 'x'.repeat(10_000) }), PayloadTooLargeError, 413)
    await rejectsWith(client.searchFiles({ query: 'q', contextDepth: 11 }), InvalidQueryError, 400)
    await rejectsWith(client.searchFiles({ query: 'q', tags: '{not json' }), InvalidQueryError, 400)
  })
})
