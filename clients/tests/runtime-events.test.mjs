// @botpress/client on the runtime API: events (create, get, list, the list
// iterator, cancel of a scheduled event) and the typed errors it raises.
import { describe, it, before } from 'node:test'
import assert from 'node:assert/strict'
import {
  Client,
  ForbiddenError,
  InvalidIdentifierError,
  InvalidPayloadError,
  ReferenceNotFoundError,
  ResourceNotFoundError,
  UnauthorizedError,
} from '@botpress/client'
import { BASE_URL, demo, runtimeClient, unique, ID, TIMESTAMP, waitFor, rejectsWith } from './helpers.mjs'

const MISSING_EVENT = 'evt_01J0000000000000000000000X'
const HOUR = 3_600_000

describe('runtime events', { timeout: 60_000 }, () => {
  const client = runtimeClient('developer')

  it('creates an event that is due at once', async () => {
    const type = unique('order.created')
    const { event } = await client.createEvent({
      type,
      payload: { orderId: 42, items: ['a', 'b'] },
      conversationId: demo.conversationId,
      userId: demo.userId,
    })
    assert.match(event.id, ID('evt'))
    assert.match(event.createdAt, TIMESTAMP)
    assert.equal(event.type, type)
    assert.deepEqual(event.payload, { orderId: 42, items: ['a', 'b'] })
    assert.equal(event.status, 'pending')
    assert.equal(event.failureReason, null)
    assert.equal(event.conversationId, demo.conversationId)
    assert.equal(event.userId, demo.userId)
    assert.equal('messageId' in event, false, 'an unset optional field is left out')

    const { event: read } = await client.getEvent({ id: event.id })
    assert.equal(read.id, event.id)
    assert.equal(read.type, type)
    assert.deepEqual(read.payload, event.payload)
    assert.equal(read.conversationId, demo.conversationId)
  })

  it('creates a scheduled event (dateTime) and reads it back scheduled', async () => {
    const dateTime = new Date(Date.now() + HOUR).toISOString()
    const { event } = await client.createEvent({ type: unique('reminder'), payload: {}, schedule: { dateTime } })
    assert.equal(event.status, 'scheduled')
    const { event: read } = await client.getEvent({ id: event.id })
    assert.equal(read.status, 'scheduled')
  })

  it('runs a scheduled event (delay) once it is due', async () => {
    const { event } = await client.createEvent({ type: unique('soon'), payload: {}, schedule: { delay: 1_000 } })
    assert.equal(event.status, 'scheduled')
    // The beat-less engine of the workers claims it at its due time: it leaves `scheduled`.
    const due = await waitFor(
      () => client.getEvent({ id: event.id }).then((r) => r.event),
      (e) => e.status !== 'scheduled',
      { timeoutMs: 30_000, what: 'the scheduled event falling due' }
    )
    assert.ok(['pending', 'processed', 'failed', 'ignored'].includes(due.status), due.status)
  })

  it('cancels a scheduled event, once', async () => {
    const { event } = await client.createEvent({ type: unique('cancel-me'), payload: { n: 1 }, schedule: { delay: HOUR } })
    const answer = await client.cancelScheduledEvent({ id: event.id })
    assert.deepEqual(answer, {})
    const { event: read } = await client.getEvent({ id: event.id })
    assert.equal(read.status, 'canceled')
    // Only while scheduled: a second cancel is a 400.
    await rejectsWith(() => client.cancelScheduledEvent({ id: event.id }), InvalidPayloadError, 400)
  })

  it('lists events newest first with filters, page by page', async () => {
    const type = unique('paged')
    const created = []
    for (let n = 0; n < 5; n++) {
      created.push((await client.createEvent({ type, payload: { n } })).event.id)
    }
    const first = await client.listEvents({ type, pageSize: 2 })
    assert.deepEqual(first.events.map((e) => e.id), [created[4], created[3]])
    assert.equal(typeof first.meta.nextToken, 'string')
    const second = await client.listEvents({ type, pageSize: 2, nextToken: first.meta.nextToken })
    assert.deepEqual(second.events.map((e) => e.id), [created[2], created[1]])
    const third = await client.listEvents({ type, pageSize: 2, nextToken: second.meta.nextToken })
    assert.deepEqual(third.events.map((e) => e.id), [created[0]])
    assert.equal(third.meta.nextToken, undefined, 'the last page has no nextToken')
  })

  it("walks every page with the client's list.events(...).collect()", async () => {
    const type = unique('iterated')
    const created = []
    for (let n = 0; n < 7; n++) {
      created.push((await client.createEvent({ type, payload: { n } })).event.id)
    }
    const walked = await client.list.events({ type, pageSize: 3 }).collect()
    assert.deepEqual(walked.map((e) => e.id), [...created].reverse())
    assert.ok(walked.every((e) => e.type === type))
    const limited = await client.list.events({ type, pageSize: 2 }).collect({ limit: 3 })
    assert.deepEqual(limited.map((e) => e.id), [created[6], created[5], created[4]])
  })

  it('filters on status and conversation', async () => {
    const type = unique('filtered')
    const { event: due } = await client.createEvent({ type, payload: {}, conversationId: demo.conversationId })
    const { event: later } = await client.createEvent({ type, payload: {}, schedule: { delay: HOUR } })
    const scheduled = await client.list.events({ type, status: 'scheduled' }).collect()
    assert.deepEqual(scheduled.map((e) => e.id), [later.id])
    const inConversation = await client.list.events({ type, conversationId: demo.conversationId }).collect()
    assert.deepEqual(inConversation.map((e) => e.id), [due.id])
  })

  describe('errors surface as the client typed errors', () => {
    let scheduled
    before(async () => {
      scheduled = (await client.createEvent({ type: unique('guarded'), payload: {}, schedule: { delay: HOUR } })).event
    })

    it('an unknown event id is ResourceNotFound', async () => {
      await rejectsWith(() => client.getEvent({ id: MISSING_EVENT }), ResourceNotFoundError, 404)
    })

    it('what cannot be an event id is InvalidIdentifier', async () => {
      await rejectsWith(() => client.getEvent({ id: 'not-an-id' }), InvalidIdentifierError, 400)
    })

    it('a body that breaks the schema is InvalidPayload', async () => {
      await rejectsWith(() => client.createEvent({ type: '', payload: {} }), InvalidPayloadError, 400)
      await rejectsWith(
        () => client.createEvent({ type: 'x', payload: {}, schedule: { delay: 1, dateTime: new Date().toISOString() } }),
        InvalidPayloadError,
        400
      )
    })

    it('a conversation of no bot of ours is ReferenceNotFound', async () => {
      await rejectsWith(
        () => client.createEvent({ type: 'x', payload: {}, conversationId: 'conv_01J0000000000000000000000X' }),
        ReferenceNotFoundError,
        400
      )
    })

    it('a viewer may read but not create nor cancel: Forbidden', async () => {
      const viewer = runtimeClient('viewer')
      const { event } = await viewer.getEvent({ id: scheduled.id })
      assert.equal(event.id, scheduled.id)
      await rejectsWith(() => viewer.createEvent({ type: 'x', payload: {} }), ForbiddenError, 403)
      await rejectsWith(() => viewer.cancelScheduledEvent({ id: scheduled.id }), ForbiddenError, 403)
    })

    it('billing may not even read: Forbidden', async () => {
      await rejectsWith(() => runtimeClient('billing').listEvents({}), ForbiddenError, 403)
    })

    it('a token of no member of the bot is Unauthorized', async () => {
      await rejectsWith(() => runtimeClient('owner', demo.otherBotId).listEvents({}), UnauthorizedError, 401)
      const stranger = new Client({ apiUrl: BASE_URL, token: demo.outsiderToken, botId: demo.botId })
      await rejectsWith(() => stranger.getEvent({ id: scheduled.id }), UnauthorizedError, 401)
    })
  })
})
