// @botpress/client on the runtime API: files (upsertFile, the uploadFile
// helper that PUTs the bytes to uploadUrl, indexing, getFile, listFiles and
// its iterator, updateFileMetadata, deleteFile) and passages
// (listFilePassages and its iterator, setFilePassages).
import { describe, it, before } from 'node:test'
import assert from 'node:assert/strict'
import { Client, ForbiddenError, InvalidQueryError, ResourceNotFoundError } from '@botpress/client'
import { BASE_URL, demo, runtimeClient, unique, ID, TIMESTAMP, waitFor, rejectsWith } from './helpers.mjs'

const GUIDE = `# Support guide

How to answer a customer who writes to the bot.

## Refunds

A refund is due within thirty days of the order.

## Delivery

Parcels leave the warehouse every weekday.
`

const client = runtimeClient('developer')

const waitForStatus = (id, statuses, what) =>
  waitFor(
    () => client.getFile({ id }).then((r) => r.file),
    (file) => statuses.includes(file.status),
    { timeoutMs: 45_000, intervalMs: 300, what }
  )

describe('files and passages', { timeout: 90_000 }, () => {
  const tag = unique('run')

  describe('uploadFile with index: true', () => {
    let uploaded
    let indexed
    const key = `${tag}/docs/support guide.md`

    before(async () => {
      uploaded = await client.uploadFile({
        key,
        content: GUIDE,
        index: true,
        tags: { suite: tag, kind: 'guide' },
        metadata: { owner: 'support' },
      })
      indexed = await waitForStatus(uploaded.file.id, ['indexing_completed', 'indexing_failed'], 'indexing')
    })

    it('announces the file and hands out a signed upload URL', () => {
      const { file } = uploaded
      assert.match(file.id, ID('file'))
      assert.equal(file.key, key)
      assert.equal(file.size, Buffer.byteLength(GUIDE))
      assert.equal(file.contentType, 'text/markdown', 'inferred from the extension')
      assert.deepEqual(file.tags, { suite: tag, kind: 'guide' })
      assert.deepEqual(file.metadata, { owner: 'support' })
      assert.equal(file.index, true)
      assert.match(file.uploadUrl, /^https?:\/\//)
      assert.match(file.createdAt, TIMESTAMP)
    })

    it('indexes the bytes the helper uploaded', () => {
      assert.equal(indexed.status, 'indexing_completed', indexed.failedStatusReason)
      assert.equal(indexed.size, Buffer.byteLength(GUIDE))
      assert.match(indexed.url, /^https?:\/\//)
    })

    it('serves the uploaded bytes back at the file url', async () => {
      const response = await fetch(indexed.url)
      assert.equal(response.status, 200)
      assert.equal(await response.text(), GUIDE)
    })

    it('gets the file by id and by key', async () => {
      const byId = await client.getFile({ id: uploaded.file.id })
      const byKey = await client.getFile({ id: key })
      assert.equal(byId.file.id, uploaded.file.id)
      assert.equal(byKey.file.id, uploaded.file.id)
      assert.equal(byKey.file.status, 'indexing_completed')
    })

    it('lists the passages in document order', async () => {
      const { passages, meta } = await client.listFilePassages({ id: uploaded.file.id, limit: 200 })
      assert.equal(meta.nextToken, undefined)
      assert.deepEqual(
        passages.map((p) => [p.content, p.meta.subtype]),
        [
          ['Support guide', 'title'],
          ['How to answer a customer who writes to the bot.', 'paragraph'],
          ['Refunds', 'subtitle'],
          ['A refund is due within thirty days of the order.', 'paragraph'],
          ['Delivery', 'subtitle'],
          ['Parcels leave the warehouse every weekday.', 'paragraph'],
        ]
      )
      assert.deepEqual(passages.map((p) => p.meta.position), [0, 1, 2, 3, 4, 5])
      assert.ok(passages.every((p) => ID('psg').test(p.id) && p.meta.type === 'chunk'))
    })

    it('pages through the passages with list.filePassages(...).collect()', async () => {
      const whole = await client.listFilePassages({ id: key, limit: 200 })
      const first = await client.listFilePassages({ id: key, limit: 4 })
      assert.equal(first.passages.length, 4)
      assert.equal(typeof first.meta.nextToken, 'string')
      const walked = await client.list.filePassages({ id: key, limit: 4 }).collect()
      assert.deepEqual(walked.map((p) => p.id), whole.passages.map((p) => p.id))
      const bySize = await client.list.filePassages({ id: key, pageSize: 1 }).collect()
      assert.deepEqual(bySize.map((p) => p.id), whole.passages.map((p) => p.id))
    })

    it('refuses a limit out of range as InvalidQuery', async () => {
      await rejectsWith(() => client.listFilePassages({ id: key, limit: 201 }), InvalidQueryError, 400)
    })
  })

  it('upsertFile then a plain PUT of the bytes, as the two steps', async () => {
    const content = 'Plain text, uploaded by hand.'
    const { file } = await client.upsertFile({ key: `${tag}/plain.txt`, size: Buffer.byteLength(content), tags: { suite: tag } })
    assert.equal(file.status, 'upload_pending')
    assert.equal(file.contentType, 'text/plain')
    const put = await fetch(file.uploadUrl, { method: 'PUT', body: content, headers: { 'Content-Type': file.contentType } })
    assert.equal(put.ok, true, `upload answered ${put.status}`)
    const { file: done } = await client.getFile({ id: file.id })
    assert.equal(done.status, 'upload_completed')
    assert.equal(done.size, Buffer.byteLength(content))
  })

  it('lists files by tag, newest first, over several pages', async () => {
    const listTag = unique('list')
    const ids = []
    for (let n = 0; n < 4; n++) {
      const { file } = await client.uploadFile({ key: `${tag}/list/${n}.txt`, content: `file ${n}`, tags: { list: listTag } })
      ids.push(file.id)
    }
    const first = await client.listFiles({ tags: { list: listTag }, pageSize: 3 })
    assert.deepEqual(first.files.map((f) => f.id), [ids[3], ids[2], ids[1]])
    assert.equal(typeof first.meta.nextToken, 'string')
    const walked = await client.list.files({ tags: { list: listTag }, pageSize: 1 }).collect()
    assert.deepEqual(walked.map((f) => f.id), [...ids].reverse())
    assert.ok(walked.every((f) => f.tags.list === listTag))
    const none = await client.listFiles({ tags: { list: listTag, missing: 'x' } })
    assert.deepEqual(none.files, [])
  })

  it('updates tags and metadata, not the content', async () => {
    const { file } = await client.uploadFile({ key: `${tag}/meta.txt`, content: 'meta', tags: { suite: tag, drop: 'me' } })
    const { file: updated } = await client.updateFileMetadata({
      id: file.id,
      tags: { added: 'yes', drop: null },
      metadata: { reviewed: true },
    })
    assert.deepEqual(updated.tags, { suite: tag, added: 'yes' })
    assert.deepEqual(updated.metadata, { reviewed: true })
    assert.equal(updated.size, 4)
  })

  it('sets passages directly', async () => {
    const { file } = await client.uploadFile({ key: `${tag}/set.txt`, content: 'to be replaced' })
    const { file: set } = await client.setFilePassages({
      id: file.id,
      passages: [
        { content: 'First set passage', meta: { type: 'chunk', subtype: 'paragraph' } },
        { content: 'Second set passage', meta: { type: 'chunk', subtype: 'title' } },
      ],
    })
    assert.equal(set.status, 'indexing_completed')
    const { passages } = await client.listFilePassages({ id: file.id })
    assert.deepEqual(passages.map((p) => p.content), ['First set passage', 'Second set passage'])
  })

  it('reads the seeded file passages page by page', async () => {
    const { file } = await client.getFile({ id: demo.fileKey })
    assert.equal(file.id, demo.fileId)
    assert.equal(file.status, 'indexing_completed')
    const passages = await client.list.filePassages({ id: demo.fileId, limit: 7 }).collect()
    assert.ok(passages.length > 7, 'more than one page')
    assert.deepEqual(passages.map((p) => p.meta.position), passages.map((_, n) => n))
  })

  it('deletes a file: it is gone, with its passages', async () => {
    const { file } = await client.uploadFile({ key: `${tag}/gone.md`, content: '# Gone\n\nSoon.', index: true })
    await waitForStatus(file.id, ['indexing_completed'], 'indexing')
    assert.deepEqual(await client.deleteFile({ id: file.id }), {})
    await rejectsWith(() => client.getFile({ id: file.id }), ResourceNotFoundError, 404)
    await rejectsWith(() => client.listFilePassages({ id: file.id }), ResourceNotFoundError, 404)
    await rejectsWith(() => client.deleteFile({ id: file.id }), ResourceNotFoundError, 404)
  })

  it('a viewer reads files but may not write them', async () => {
    const viewer = runtimeClient('viewer')
    const { file } = await viewer.getFile({ id: demo.fileId })
    assert.equal(file.key, demo.fileKey)
    await rejectsWith(() => viewer.uploadFile({ key: `${tag}/viewer.txt`, content: 'no' }), ForbiddenError, 403)
    await rejectsWith(() => viewer.deleteFile({ id: demo.fileId }), ForbiddenError, 403)
  })

  it('a file of another bot is not found', async () => {
    const owner = runtimeClient('owner')
    const { file } = await owner.uploadFile({ key: `${tag}/mine.txt`, content: 'mine' })
    const other = new Client({ apiUrl: BASE_URL, token: demo.outsiderToken, botId: demo.otherBotId })
    await rejectsWith(() => other.getFile({ id: file.id }), ResourceNotFoundError, 404)
  })
})
