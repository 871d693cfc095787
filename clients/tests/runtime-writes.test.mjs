// @botpress/client on the runtime API's writes: users and conversations
// (create, getOrCreate, update, delete), participants (add, get, list and its
// iterator, remove), messages changed and deleted as a chat listener
// (@botpress/chat) hears them, and trackAnalytics.
import { describe, it, before, after } from 'node:test'
import assert from 'node:assert/strict'
import {
  ForbiddenError,
  InvalidIdentifierError,
  InvalidPayloadError,
  ReferenceNotFoundError,
  ResourceNotFoundError,
} from '@botpress/client'
import { runtimeClient, chatConnect, unique, ID, TIMESTAMP, nextSignal, rejectsWith } from './helpers.mjs'

const client = runtimeClient('developer')

describe('runtime writes on users, conversations, participants and messages', { timeout: 60_000 }, () => {
  it('creates, gets or creates, updates and deletes a user', async () => {
    const crm = unique('crm')
    const { user } = await client.createUser({
      tags: { crm },
      name: 'Ada',
      pictureUrl: 'https://example.com/ada.png',
      properties: { plan: 'pro' },
    })
    assert.match(user.id, ID('user'))
    assert.match(user.createdAt, TIMESTAMP)
    assert.deepEqual(
      { name: user.name, pictureUrl: user.pictureUrl, tags: user.tags, properties: user.properties },
      { name: 'Ada', pictureUrl: 'https://example.com/ada.png', tags: { crm }, properties: { plan: 'pro' } }
    )

    const found = await client.getOrCreateUser({ tags: { crm }, discriminateByTags: ['crm'] })
    assert.deepEqual(found.meta, { created: false })
    assert.equal(found.user.id, user.id)
    const other = await client.getOrCreateUser({ tags: { crm: unique('crm') } })
    assert.deepEqual(other.meta, { created: true })

    const { user: updated } = await client.updateUser({ id: user.id, name: null, tags: { crm: null, step: '2' } })
    assert.equal(updated.name, undefined)
    assert.deepEqual(updated.tags, { step: '2' })

    assert.deepEqual(await client.deleteUser({ id: user.id }), {})
    await rejectsWith(() => client.getUser({ id: user.id }), ResourceNotFoundError, 404)
  })

  it('creates, gets or creates, updates and deletes a conversation', async () => {
    const thread = unique('thread')
    const { conversation } = await client.createConversation({ channel: 'dm', tags: { thread } })
    assert.match(conversation.id, ID('conv'))
    assert.equal(conversation.channel, 'dm')
    assert.equal(conversation.integration, '')
    assert.deepEqual(conversation.tags, { thread })

    const found = await client.getOrCreateConversation({ channel: 'dm', tags: { thread } })
    assert.deepEqual(found.meta, { created: false })
    assert.equal(found.conversation.id, conversation.id)
    const elsewhere = await client.getOrCreateConversation({ channel: 'group', tags: { thread } })
    assert.deepEqual(elsewhere.meta, { created: true })

    const { conversation: updated } = await client.updateConversation({
      id: conversation.id,
      currentTaskId: 'ignored',
      tags: { thread: '', topic: 'billing' },
      properties: { locale: 'en' },
    })
    assert.deepEqual(updated.tags, { topic: 'billing' })
    assert.deepEqual(updated.properties, { locale: 'en' })

    assert.deepEqual(await client.deleteConversation({ id: conversation.id }), {})
    await rejectsWith(() => client.getConversation({ id: conversation.id }), ResourceNotFoundError, 404)
  })

  describe('participants and messages, as a chat user hears them', () => {
    let chat
    let conversationId
    let listener

    before(async () => {
      chat = await chatConnect()
      conversationId = (await client.createConversation({ channel: 'channel', tags: {} })).conversation.id
      await client.addParticipant({ id: conversationId, userId: chat.user.id })
      listener = await chat.listenConversation({ id: conversationId })
    })

    after(async () => {
      await listener?.disconnect()
    })

    it('adds, gets, lists and removes participants', async () => {
      const { user: bob } = await client.createUser({ tags: {}, name: 'Bob' })
      const added = nextSignal(listener, 'participant_added', (p) => p.participantId === bob.id)
      const { participant } = await client.addParticipant({ id: conversationId, userId: bob.id })
      assert.equal(participant.id, bob.id)
      assert.equal(participant.name, 'Bob')
      await added

      const again = await client.addParticipant({ id: conversationId, userId: bob.id })
      assert.equal(again.participant.id, bob.id)
      const { participant: got } = await client.getParticipant({ id: conversationId, userId: bob.id })
      assert.equal(got.id, bob.id)
      const { participants, meta } = await client.listParticipants({ id: conversationId, pageSize: 1 })
      assert.deepEqual(participants.map((p) => p.id), [chat.user.id])
      assert.equal(typeof meta.nextToken, 'string')
      const walked = await client.list.participants({ id: conversationId, pageSize: 1 }).collect()
      assert.deepEqual(walked.map((p) => p.id), [chat.user.id, bob.id])

      const removed = nextSignal(listener, 'participant_removed', (p) => p.participantId === bob.id)
      assert.deepEqual(await client.removeParticipant({ id: conversationId, userId: bob.id }), {})
      await removed
      await rejectsWith(() => client.getParticipant({ id: conversationId, userId: bob.id }), ResourceNotFoundError, 404)
    })

    it('updates a message: its tags merged, its payload replaced, heard by the listener', async () => {
      const { message } = await chat.createMessage({ conversationId, payload: { type: 'text', text: 'helo' } })
      // @botpress/chat 0.5 knows no message_updated signal: it emits it as `unknown`, raw.
      const heard = nextSignal(listener, 'unknown', (raw) => JSON.parse(raw).type === 'message_updated')
      const { message: updated } = await client.updateMessage({
        id: message.id,
        tags: { reviewed: 'yes' },
        payload: { text: 'hello' },
      })
      assert.equal(updated.type, 'text')
      assert.deepEqual(updated.payload, { type: 'text', text: 'hello' })
      assert.deepEqual(updated.tags, { reviewed: 'yes' })
      assert.equal(updated.direction, 'incoming')
      const signal = JSON.parse(await heard)
      assert.equal(signal.data.id, message.id)
      assert.deepEqual(signal.data.payload, { type: 'text', text: 'hello' })
      assert.equal(signal.data.userId, chat.user.id)
    })

    it('deletes a message, heard by the listener', async () => {
      const { message } = await chat.createMessage({ conversationId, payload: { type: 'text', text: 'oops' } })
      const heard = nextSignal(listener, 'message_deleted', (m) => m.id === message.id)
      assert.deepEqual(await client.deleteMessage({ id: message.id }), {})
      await heard
      await rejectsWith(() => client.getMessage({ id: message.id }), ResourceNotFoundError, 404)
    })
  })

  it('tracks analytics', async () => {
    assert.deepEqual(await client.trackAnalytics({ name: 'suite.runs', count: 1 }), {})
    await rejectsWith(() => client.trackAnalytics({ name: 'suite.runs', count: 0 }), InvalidPayloadError, 400)
  })

  describe('errors', () => {
    it('an integration that is not installed is ReferenceNotFound', async () => {
      await rejectsWith(
        () => client.createConversation({ channel: 'dm', tags: {}, integrationName: unique('nope') }),
        ReferenceNotFoundError,
        400
      )
    })

    it('an unknown user, conversation or message is ResourceNotFound; a malformed id InvalidIdentifier', async () => {
      await rejectsWith(() => client.deleteUser({ id: 'user_01J0000000000000000000000X' }), ResourceNotFoundError, 404)
      await rejectsWith(
        () => client.updateConversation({ id: 'conv_01J0000000000000000000000X', tags: {} }),
        ResourceNotFoundError,
        404
      )
      await rejectsWith(() => client.deleteMessage({ id: 'hello' }), InvalidIdentifierError, 400)
    })

    it('a viewer may not write', async () => {
      const viewer = runtimeClient('viewer')
      await rejectsWith(() => viewer.createUser({ tags: {} }), ForbiddenError, 403)
      await rejectsWith(() => viewer.trackAnalytics({ name: 'n', count: 1 }), ForbiddenError, 403)
    })
  })
})
