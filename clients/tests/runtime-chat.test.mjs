// @botpress/client on the runtime API's chat routes: messages
// (createMessage, getMessage, listMessages and its iterator), conversations
// and users (get, list and their iterators).
import { describe, it, before } from 'node:test'
import assert from 'node:assert/strict'
import {
  ForbiddenError,
  InvalidIdentifierError,
  InvalidPayloadError,
  ReferenceNotFoundError,
  ResourceNotFoundError,
} from '@botpress/client'
import { demo, runtimeClient, chatConnect, unique, ID, TIMESTAMP, waitFor, rejectsWith } from './helpers.mjs'

const client = runtimeClient('developer')

describe('runtime messages, conversations and users', { timeout: 60_000 }, () => {
  // A conversation of its own, made through the chat interface by a user
  // who chose no ids: its runtime ids are the same conv_… / user_… ids.
  let user
  let conversationId

  before(async () => {
    user = await chatConnect()
    conversationId = (await user.createConversation({})).conversation.id
  })

  it('creates a message as the bot and reads it back', async () => {
    const text = unique('reply')
    const { message } = await client.createMessage({
      conversationId,
      userId: user.user.id,
      type: 'text',
      payload: { type: 'text', text },
      tags: { kind: 'reply' },
    })
    assert.match(message.id, ID('msg'))
    assert.match(message.createdAt, TIMESTAMP)
    assert.equal(message.conversationId, conversationId)
    assert.equal(message.userId, user.user.id)
    assert.equal(message.type, 'text')
    assert.deepEqual(message.payload, { type: 'text', text })
    assert.deepEqual(message.tags, { kind: 'reply' })

    const { message: read } = await client.getMessage({ id: message.id })
    assert.equal(read.id, message.id)
    assert.deepEqual(read.payload, { type: 'text', text })
    assert.deepEqual(read.tags, { kind: 'reply' })
  })

  it('schedules a message: unseen until due, then made by the workers', async () => {
    const text = unique('later')
    const { message } = await client.createMessage({
      conversationId,
      userId: user.user.id,
      type: 'text',
      payload: { type: 'text', text },
      tags: {},
      schedule: { delay: 1_500 },
    })
    assert.match(message.id, ID('msg'))
    assert.ok(Date.parse(message.createdAt) > Date.now() - 1_000, 'createdAt is the due time')
    await rejectsWith(() => client.getMessage({ id: message.id }), ResourceNotFoundError, 404)
    const made = await waitFor(
      () => client.getMessage({ id: message.id }).then((r) => r.message, () => null),
      (read) => read !== null,
      { timeoutMs: 30_000, what: 'the scheduled message being made' }
    )
    assert.deepEqual(made.payload, { type: 'text', text })
    assert.equal(made.createdAt, message.createdAt)
    const listed = await client.list.messages({ conversationId }).collect()
    assert.ok(listed.some((m) => m.id === message.id))
  })

  it('getOrCreateMessage finds the message whose tags match, else creates it', async () => {
    const ticket = unique('ticket')
    const body = {
      conversationId,
      userId: user.user.id,
      type: 'text',
      payload: { type: 'text', text: `status of ${ticket}` },
      tags: { ticket },
      discriminateByTags: ['ticket'],
    }
    const first = await client.getOrCreateMessage(body)
    assert.equal(first.meta.created, true)
    assert.deepEqual(first.message.tags, { ticket })
    const second = await client.getOrCreateMessage(body)
    assert.equal(second.meta.created, false)
    assert.equal(second.message.id, first.message.id)
  })

  it('lists a conversation messages newest first, over several pages', async () => {
    const { conversation } = await user.createConversation({})
    const sent = []
    for (let n = 0; n < 5; n++) {
      const { message } = await client.createMessage({
        conversationId: conversation.id,
        userId: user.user.id,
        type: 'text',
        payload: { type: 'text', text: `message ${n}` },
        tags: {},
      })
      sent.push(message.id)
    }
    const first = await client.listMessages({ conversationId: conversation.id, pageSize: 2 })
    assert.deepEqual(first.messages.map((m) => m.id), [sent[4], sent[3]])
    assert.equal(typeof first.meta.nextToken, 'string')
    const walked = await client.list.messages({ conversationId: conversation.id, pageSize: 2 }).collect()
    assert.deepEqual(walked.map((m) => m.id), [...sent].reverse())
    const replies = await client.list.messages({ conversationId: conversation.id, tags: { kind: 'none' } }).collect()
    assert.deepEqual(replies, [])
  })

  it('filters messages on tags', async () => {
    const kind = unique('kind')
    const { message } = await client.createMessage({
      conversationId,
      userId: user.user.id,
      type: 'text',
      payload: { type: 'text', text: 'tagged' },
      tags: { kind },
    })
    const tagged = await client.list.messages({ conversationId, tags: { kind } }).collect()
    assert.deepEqual(tagged.map((m) => m.id), [message.id])
  })

  it('gets the conversation a chat user made, under the same id', async () => {
    assert.match(conversationId, ID('conv'))
    const { conversation } = await client.getConversation({ id: conversationId })
    assert.equal(conversation.id, conversationId)
    assert.match(conversation.createdAt, TIMESTAMP)
    assert.match(conversation.updatedAt, TIMESTAMP)
    assert.deepEqual(conversation.tags, {})
  })

  it('gets a conversation whose chat id was chosen, under its conv_ id', async () => {
    const chatId = unique('support')
    await user.createConversation({ id: chatId })
    const { conversations } = await client.listConversations({ tags: { 'chat:id': chatId } })
    assert.equal(conversations.length, 1)
    assert.match(conversations[0].id, ID('conv'))
    assert.deepEqual(conversations[0].tags, { 'chat:id': chatId })
    const { conversation } = await client.getConversation({ id: conversations[0].id })
    assert.equal(conversation.id, conversations[0].id)
  })

  it('lists conversations newest first with the iterator, every one once', async () => {
    const made = []
    for (let n = 0; n < 3; n++) {
      made.push((await user.createConversation({})).conversation.id)
    }
    const walked = await client.list.conversations({ pageSize: 2 }).collect()
    const ids = walked.map((c) => c.id)
    assert.equal(new Set(ids).size, ids.length, 'no conversation twice')
    assert.deepEqual(ids.filter((id) => made.includes(id)), [...made].reverse())
    assert.ok(ids.includes(conversationId) && ids.includes(demo.conversationId))
    const stamps = walked.map((c) => c.createdAt)
    assert.deepEqual(stamps, [...stamps].sort().reverse())
  })

  it('gets users and lists the participants of a conversation', async () => {
    const { user: read } = await client.getUser({ id: user.user.id })
    assert.equal(read.id, user.user.id)
    assert.match(read.createdAt, TIMESTAMP)
    const { user: seeded } = await client.getUser({ id: demo.userId })
    assert.equal(seeded.name, 'Demo user')
    const participants = await client.list.users({ conversationId }).collect()
    assert.deepEqual(participants.map((u) => u.id), [user.user.id])
    const some = await client.list.users({ pageSize: 1 }).collect({ limit: 3 })
    assert.equal(some.length, 3)
  })

  describe('errors', () => {
    it('an unknown message, conversation or user is ResourceNotFound', async () => {
      await rejectsWith(() => client.getMessage({ id: 'msg_01J0000000000000000000000X' }), ResourceNotFoundError, 404)
      await rejectsWith(() => client.getConversation({ id: 'conv_01J0000000000000000000000X' }), ResourceNotFoundError, 404)
      await rejectsWith(() => client.getUser({ id: 'user_01J0000000000000000000000X' }), ResourceNotFoundError, 404)
    })

    it('what cannot be a message id is InvalidIdentifier', async () => {
      await rejectsWith(() => client.getMessage({ id: 'hello' }), InvalidIdentifierError, 400)
    })

    it('a message to a conversation the bot does not own is ReferenceNotFound', async () => {
      await rejectsWith(
        () =>
          client.createMessage({
            conversationId: 'conv_01J0000000000000000000000X',
            userId: user.user.id,
            type: 'text',
            payload: { type: 'text', text: 'lost' },
            tags: {},
          }),
        ReferenceNotFoundError,
        400
      )
    })

    it('a payload that does not match its type is InvalidPayload', async () => {
      await rejectsWith(
        () =>
          client.createMessage({
            conversationId,
            userId: user.user.id,
            type: 'image',
            payload: { type: 'text', text: 'mismatch' },
            tags: {},
          }),
        InvalidPayloadError,
        400
      )
    })

    it('a viewer may read messages but not create them', async () => {
      const viewer = runtimeClient('viewer')
      await viewer.listMessages({ conversationId })
      await rejectsWith(
        () =>
          viewer.createMessage({
            conversationId,
            userId: user.user.id,
            type: 'text',
            payload: { type: 'text', text: 'no' },
            tags: {},
          }),
        ForbiddenError,
        403
      )
    })
  })
})
