// @botpress/chat against the chat interface ({CHAT_URL}/{webhookId}):
// connect (hello, then a new user or a stored key), users, conversations,
// participants, messages, custom events, the live stream (listenConversation)
// and a bot reply through @botpress/client arriving on it.
import { describe, it, before, after } from 'node:test'
import assert from 'node:assert/strict'
import * as chat from '@botpress/chat'
import { CHAT_URL, CHAT_API_URL, demo, runtimeClient, chatConnect, unique, ID, TIMESTAMP, nextSignal, rejectsWith } from './helpers.mjs'

const MISSING_CONVERSATION = 'conv_01J0000000000000000000000X'

describe('chat: connect and users', { timeout: 60_000 }, () => {
  it('connects as a new user: hello, then a user and its key', async () => {
    const client = await chatConnect()
    assert.match(client.user.id, ID('user'))
    assert.match(client.user.createdAt, TIMESTAMP)
    assert.equal(typeof client.user.key, 'string')
    const { user } = await client.getUser({})
    assert.equal(user.id, client.user.id)
  })

  it('connects with a stored key: the seeded user', async () => {
    const client = await chatConnect({ userKey: demo.userKey })
    assert.equal(client.user.id, demo.userId)
    assert.equal(client.user.name, 'Demo user')
    assert.equal(client.user.key, demo.userKey)
  })

  it('connects with a chosen user id, and again with the key it got', async () => {
    const userId = unique('customer')
    const first = await chatConnect({ userId })
    assert.equal(first.user.id, userId)
    const again = await chatConnect({ userKey: first.user.key })
    assert.equal(again.user.id, userId)
    assert.equal(again.user.createdAt, first.user.createdAt)
  })

  it('creates a user with a profile, without connect()', async () => {
    const client = new chat.Client({ apiUrl: CHAT_API_URL })
    const { user, key } = await client.createUser({ name: 'Ada', pictureUrl: 'https://example.com/ada.png', profile: '{"plan":"pro"}' })
    assert.equal(user.name, 'Ada')
    assert.equal(user.pictureUrl, 'https://example.com/ada.png')
    assert.equal(user.profile, '{"plan":"pro"}')
    const { user: same } = await client.getOrCreateUser({ 'x-user-key': key })
    assert.equal(same.id, user.id)
    assert.equal(same.name, 'Ada')
  })

  it('updates and deletes the key user', async () => {
    const client = await chatConnect()
    const { user } = await client.updateUser({ name: 'Grace', profile: 'admiral' })
    assert.equal(user.id, client.user.id)
    assert.equal(user.name, 'Grace')
    assert.equal(user.profile, 'admiral')
    assert.equal((await client.getUser({})).user.name, 'Grace')
    assert.deepEqual(await client.deleteUser({}), {})
    await rejectsWith(() => client.getUser({}), chat.UnauthorizedError, 401)
  })

  it('a key that is not signed for the connection is Unauthorized', async () => {
    const client = new chat.Client({ apiUrl: CHAT_API_URL })
    await rejectsWith(() => client.getUser({ 'x-user-key': `${demo.userKey}x` }), chat.UnauthorizedError, 401)
    await rejectsWith(() => client.listConversations({ 'x-user-key': 'not a jwt' }), chat.UnauthorizedError, 401)
  })

  it('connecting to an unknown webhook id fails at hello with the 404', async () => {
    await assert.rejects(
      () => chat.Client.connect({ apiUrl: `${CHAT_URL}/00000000-0000-4000-8000-000000000000` }),
      (thrown) => {
        assert.ok(thrown instanceof chat.ChatClientError, thrown?.constructor?.name)
        assert.match(thrown.message, /404/)
        return true
      }
    )
  })
})

describe('chat: conversations, participants, messages, events', { timeout: 60_000 }, () => {
  let owner
  let guest
  let stranger
  let conversationId

  before(async () => {
    ;[owner, guest, stranger] = await Promise.all([chatConnect(), chatConnect(), chatConnect()])
    conversationId = (await owner.createConversation({})).conversation.id
  })

  it('creates a conversation; a chosen id is kept', async () => {
    assert.match(conversationId, ID('conv'))
    const chosen = unique('support')
    const { conversation } = await owner.createConversation({ id: chosen })
    assert.equal(conversation.id, chosen)
    assert.match(conversation.createdAt, TIMESTAMP)
    assert.match(conversation.updatedAt, TIMESTAMP)
    await rejectsWith(() => owner.createConversation({ id: chosen }), chat.AlreadyExistsError, 409)
  })

  it('gets a conversation and lists the caller conversations', async () => {
    const { conversation } = await owner.getConversation({ id: conversationId })
    assert.equal(conversation.id, conversationId)
    const { conversations } = await owner.listConversations({})
    assert.ok(conversations.some((c) => c.id === conversationId))
    const walked = await owner.list.conversations({}).collect()
    assert.deepEqual(walked.map((c) => c.id), conversations.map((c) => c.id))
    const guests = await guest.list.conversations({}).collect()
    assert.ok(!guests.some((c) => c.id === conversationId), 'not a participant yet')
  })

  it('get-or-create answers the same conversation twice', async () => {
    const id = unique('goc')
    const first = await owner.getOrCreateConversation({ id })
    const second = await owner.getOrCreateConversation({ id })
    assert.equal(first.conversation.id, id)
    assert.deepEqual(second.conversation, first.conversation)
  })

  it('deletes a conversation (owner only)', async () => {
    const { conversation } = await owner.createConversation({})
    assert.deepEqual(await owner.deleteConversation({ id: conversation.id }), {})
    await rejectsWith(() => owner.getConversation({ id: conversation.id }), chat.ResourceNotFoundError, 404)
  })

  it('adds, gets, lists and removes participants', async () => {
    const { conversation } = await owner.createConversation({})
    const { participant } = await owner.addParticipant({ conversationId: conversation.id, userId: guest.user.id })
    assert.equal(participant.id, guest.user.id)
    const { participant: read } = await guest.getParticipant({ conversationId: conversation.id, userId: owner.user.id })
    assert.equal(read.id, owner.user.id)
    const { participants } = await owner.listParticipants({ conversationId: conversation.id })
    assert.deepEqual(participants.map((p) => p.id).sort(), [owner.user.id, guest.user.id].sort())
    const walked = await guest.list.participants({ conversationId: conversation.id }).collect()
    assert.deepEqual(walked.map((p) => p.id).sort(), [owner.user.id, guest.user.id].sort())
    await rejectsWith(
      () => guest.addParticipant({ conversationId: conversation.id, userId: stranger.user.id }),
      chat.ForbiddenError,
      403
    )
    assert.deepEqual(await owner.removeParticipant({ conversationId: conversation.id, userId: guest.user.id }), {})
    await rejectsWith(() => guest.getConversation({ id: conversation.id }), chat.ForbiddenError, 403)
  })

  it('participants with chosen ids that hold a slash', async () => {
    const userId = unique('team/ann')
    const ann = await chatConnect({ userId })
    const conversation = (await owner.createConversation({ id: unique('desk/1') })).conversation
    await owner.addParticipant({ conversationId: conversation.id, userId })
    const { participant } = await owner.getParticipant({ conversationId: conversation.id, userId })
    assert.equal(participant.id, userId)
    const { message } = await ann.createMessage({ conversationId: conversation.id, payload: { type: 'text', text: 'hi' } })
    assert.equal(message.userId, userId)
    assert.equal(message.conversationId, conversation.id)
  })

  it('creates, gets, lists and deletes messages', async () => {
    const { message } = await owner.createMessage({
      conversationId,
      payload: { type: 'choice', text: 'Pick one', options: [{ label: 'Yes', value: 'yes' }, { label: 'No', value: 'no' }] },
      metadata: { source: 'suite' },
    })
    assert.match(message.id, ID('msg'))
    assert.match(message.createdAt, TIMESTAMP)
    assert.equal(message.userId, owner.user.id)
    assert.equal(message.conversationId, conversationId)
    assert.deepEqual(message.metadata, { source: 'suite' })
    const { message: read } = await owner.getMessage({ id: message.id })
    assert.deepEqual(read.payload, message.payload)
    const { messages } = await owner.listMessages({ conversationId })
    assert.equal(messages[0].id, message.id, 'newest first')
    assert.deepEqual(await owner.deleteMessage({ id: message.id }), {})
    await rejectsWith(() => owner.getMessage({ id: message.id }), chat.ResourceNotFoundError, 404)
  })

  it('walks more than a page of messages with list.messages(...).collect()', async () => {
    const { conversation } = await owner.createConversation({})
    const sent = []
    for (let n = 0; n < 25; n++) {
      sent.push((await owner.createMessage({ conversationId: conversation.id, payload: { type: 'text', text: `n${n}` } })).message.id)
    }
    const first = await owner.listMessages({ conversationId: conversation.id })
    assert.ok(first.messages.length < 25 && typeof first.meta.nextToken === 'string', 'more than one page')
    const walked = await owner.list.messages({ conversationId: conversation.id }).collect()
    assert.deepEqual(walked.map((m) => m.id), [...sent].reverse())
  })

  it('refuses messages of non-participants and deletes by others', async () => {
    await rejectsWith(
      () => stranger.createMessage({ conversationId, payload: { type: 'text', text: 'let me in' } }),
      chat.ForbiddenError,
      403
    )
    await owner.addParticipant({ conversationId, userId: guest.user.id })
    const { message } = await owner.createMessage({ conversationId, payload: { type: 'text', text: 'mine' } })
    await rejectsWith(() => guest.deleteMessage({ id: message.id }), chat.ForbiddenError, 403)
    await rejectsWith(() => stranger.getConversation({ id: conversationId }), chat.ForbiddenError, 403)
  })

  it('an invalid payload is InvalidPayload, an unknown conversation ResourceNotFound', async () => {
    await rejectsWith(
      () => owner.createMessage({ conversationId, payload: { type: 'text', text: '' } }),
      chat.InvalidPayloadError,
      400
    )
    await rejectsWith(() => owner.getConversation({ id: MISSING_CONVERSATION }), chat.ResourceNotFoundError, 404)
  })

  it('creates and gets a custom event', async () => {
    const { event } = await owner.createEvent({ conversationId, payload: { clicked: 'buy' } })
    assert.match(event.id, ID('evt'))
    assert.match(event.createdAt, TIMESTAMP)
    assert.deepEqual(event.payload, { clicked: 'buy' })
    assert.equal(event.conversationId, conversationId)
    assert.equal(event.userId, owner.user.id)
    const { event: read } = await owner.getEvent({ id: event.id })
    assert.deepEqual(read, event)
    // The bot's runtime API sees it as an event of the conversation.
    const { event: runtime } = await runtimeClient('developer').getEvent({ id: event.id })
    assert.equal(runtime.conversationId, conversationId)
  })
})

describe('chat: the live stream', { timeout: 60_000 }, () => {
  let owner
  let guest
  let conversationId
  let listener
  const errors = []

  before(async () => {
    ;[owner, guest] = await Promise.all([chatConnect(), chatConnect()])
    conversationId = (await owner.createConversation({})).conversation.id
    await owner.addParticipant({ conversationId, userId: guest.user.id })
    listener = await owner.listenConversation({ id: conversationId })
    listener.on('error', (err) => errors.push(err))
  })

  after(async () => {
    await listener?.disconnect()
  })

  it('is connected', () => {
    assert.equal(listener.status, 'connected')
  })

  it("receives message_created for another participant's message", async () => {
    const text = unique('hello bot')
    const signal = nextSignal(listener, 'message_created', (m) => m.payload.text === text)
    const { message } = await guest.createMessage({ conversationId, payload: { type: 'text', text } })
    const received = await signal
    assert.equal(received.id, message.id)
    assert.equal(received.userId, guest.user.id)
    assert.equal(received.conversationId, conversationId)
    assert.equal(received.isBot, false)
    assert.equal(received.createdAt, message.createdAt)
  })

  it('receives a bot reply made through @botpress/client, with isBot true', async () => {
    const text = unique('You said hello')
    const signal = nextSignal(listener, 'message_created', (m) => m.payload.text === text)
    // The runtime id of a conversation whose chat id was not chosen is the same conv_… id.
    const { message } = await runtimeClient('developer').createMessage({
      conversationId,
      userId: demo.botId,
      type: 'text',
      payload: { type: 'text', text },
      tags: {},
    })
    const received = await signal
    assert.equal(received.id, message.id)
    assert.equal(received.isBot, true)
    assert.equal(received.conversationId, conversationId)
    assert.deepEqual(received.payload, { type: 'text', text })
    // The chat interface shows the same message.
    const { message: read } = await owner.getMessage({ id: message.id })
    assert.equal(read.userId, received.userId)
  })

  it('receives a scheduled bot message when it falls due', async () => {
    const text = unique('reminder')
    const signal = nextSignal(listener, 'message_created', (m) => m.payload.text === text, 30_000)
    const { message } = await runtimeClient('developer').createMessage({
      conversationId,
      userId: demo.botId,
      type: 'text',
      payload: { type: 'text', text },
      tags: {},
      schedule: { delay: 1_000 },
    })
    const received = await signal
    assert.equal(received.id, message.id)
    assert.equal(received.isBot, true)
    assert.equal(received.createdAt, message.createdAt)
  })

  it('receives event_created for a custom event', async () => {
    const marker = unique('event')
    const signal = nextSignal(listener, 'event_created', (e) => e.payload.marker === marker)
    const { event } = await guest.createEvent({ conversationId, payload: { marker } })
    const received = await signal
    assert.equal(received.id, event.id)
    assert.equal(received.userId, guest.user.id)
    assert.equal(received.isBot, false)
  })

  it('receives message_deleted', async () => {
    const { message } = await guest.createMessage({ conversationId, payload: { type: 'text', text: 'oops' } })
    const signal = nextSignal(listener, 'message_deleted', (m) => m.id === message.id)
    await guest.deleteMessage({ id: message.id })
    const received = await signal
    assert.deepEqual(received, { id: message.id, conversationId, userId: guest.user.id })
  })

  it('receives participant_added and participant_removed', async () => {
    const newcomer = await chatConnect()
    const added = nextSignal(listener, 'participant_added', (p) => p.participantId === newcomer.user.id)
    await owner.addParticipant({ conversationId, userId: newcomer.user.id })
    assert.deepEqual(await added, { conversationId, participantId: newcomer.user.id })
    const removed = nextSignal(listener, 'participant_removed', (p) => p.participantId === newcomer.user.id)
    await owner.removeParticipant({ conversationId, userId: newcomer.user.id })
    assert.deepEqual(await removed, { conversationId, participantId: newcomer.user.id })
  })

  it('stayed connected without an error', () => {
    assert.deepEqual(errors, [])
    assert.equal(listener.status, 'connected')
  })

  it('refuses a listener who is not a participant (403), or of no conversation (404)', async () => {
    const stranger = await chatConnect()
    await assert.rejects(() => stranger.listenConversation({ id: conversationId }), { status: 403 })
    await assert.rejects(() => owner.listenConversation({ id: MISSING_CONVERSATION }), { status: 404 })
  })
})
