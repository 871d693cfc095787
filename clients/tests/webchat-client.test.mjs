// The official webchat's own client (@botpress/webchat-client), as the
// webchat component uses it: a browser without a key starts with
// initialize(), which makes its user, key and conversation and streams the
// conversation (init first); the client made with that key sends, reads the
// history, sets user data, and gives and takes back feedback on the bot's
// reply, heard on the stream.
import { describe, it, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { createClient, initialize } from '@botpress/webchat-client'
import { CHAT_URL, ID, TIMESTAMP, demo, runtimeClient, unique } from './helpers.mjs'

const apiUrl = CHAT_URL
const clientId = demo.webhookId

/** The next `type` signal on a webchat-client stream whose data `matches`. */
function nextOn(stream, type, matches = () => true, timeoutMs = 15_000) {
  return new Promise((resolve, reject) => {
    let stop = () => {}
    const timer = setTimeout(() => {
      stop()
      reject(new Error(`no ${type} signal within ${timeoutMs} ms`))
    }, timeoutMs)
    stop = stream.on(type, (data) => {
      if (!matches(data)) return
      clearTimeout(timer)
      stop()
      resolve(data)
    })
  })
}

describe('the official webchat client', { timeout: 60_000 }, () => {
  let stream
  let init
  let client

  before(async () => {
    stream = initialize({ clientId, apiUrl })
    init = await nextOn(stream, 'init')
    client = createClient({ userKey: init.user.userKey, clientId, apiUrl })
  })

  after(() => stream?.disconnect())

  it('starts with a user, its key and a conversation of its own', () => {
    assert.ok(init.user.userKey.length > 20)
    assert.match(init.user.createdAt, TIMESTAMP)
    assert.match(init.conversation.id, ID('conv'))
    assert.deepEqual(init.messages, [])
    assert.deepEqual(
      init.participants.map((participant) => participant.id),
      [init.user.id]
    )
  })

  it('sends a message and hears it, with the metadata it gave', async () => {
    const text = unique('hello')
    const heard = nextOn(stream, 'message_created', (m) => m.payload.text === text)
    const { message } = await client.createMessage({
      conversationId: init.conversation.id,
      payload: { type: 'text', text },
      metadata: { clientMessageId: 'local-1' },
    })
    assert.match(message.id, ID('msg'))
    const data = await heard
    assert.equal(data.id, message.id)
    assert.deepEqual(data.metadata, { clientMessageId: 'local-1' })
    assert.equal(data.userId, init.user.id)
  })

  it('finds the history again on a new start with its key and conversation', async () => {
    const again = initialize({
      clientId,
      apiUrl,
      userToken: init.user.userKey,
      conversationId: init.conversation.id,
    })
    try {
      const resumed = await nextOn(again, 'init')
      assert.equal(resumed.conversation.id, init.conversation.id)
      assert.equal(resumed.user.id, init.user.id)
      assert.equal(resumed.messages.length, 1)
      const { messages } = await client.listConversationMessages({ conversationId: init.conversation.id })
      assert.deepEqual(
        messages.map((m) => m.id),
        resumed.messages.map((m) => m.id)
      )
    } finally {
      again.disconnect()
    }
  })

  it('keeps user data', async () => {
    const { user } = await client.updateUser({ userData: { plan: 'pro', seats: 3 } })
    assert.deepEqual(user.data, { plan: 'pro', seats: 3 })
    const { user: read } = await client.getUser()
    assert.deepEqual(read.data, { plan: 'pro', seats: 3 })
  })

  it("gives and takes back feedback on the bot's reply", async () => {
    const text = unique('reply')
    const replied = nextOn(stream, 'message_created', (m) => m.payload.text === text)
    const { message: reply } = await runtimeClient().createMessage({
      conversationId: init.conversation.id,
      userId: demo.botId,
      type: 'text',
      payload: { type: 'text', text },
      tags: {},
    })
    assert.equal((await replied).isBot, true)

    assert.deepEqual(await client.addMessageFeedback({ messageId: reply.id, value: 'negative', comment: 'Too short' }), {})
    const { message } = await client.getMessage({ messageId: reply.id })
    assert.deepEqual(message.feedback, { value: 'negative', comment: 'Too short' })
    assert.deepEqual(await client.removeMessageFeedback({ messageId: reply.id }), {})
    const { message: after } = await client.getMessage({ messageId: reply.id })
    assert.equal(after.feedback, undefined)

    const { events } = await runtimeClient().listEvents({ type: 'message_feedback', conversationId: init.conversation.id })
    assert.deepEqual(
      events.map((event) => event.payload.value).sort(),
      ['negative', null].sort()
    )
  })

  it('sends a file: made, uploaded to its uploadUrl, read back at its url', async () => {
    const bytes = new TextEncoder().encode('a note from the webchat')
    const { file } = await client.createFile({ key: `${unique('note')}.txt`, size: bytes.length })
    assert.equal(file.contentType, 'text/plain')
    const put = await fetch(file.uploadUrl, {
      method: 'PUT',
      headers: { 'content-type': file.contentType, 'x-amz-tagging': 'public=true' },
      body: bytes,
    })
    assert.equal(put.status, 200, await put.text())
    const got = await fetch(file.url)
    assert.equal(got.status, 200)
    assert.equal(await got.text(), 'a note from the webchat')
  })

  it('surfaces refusals as the error body the component reads', async () => {
    await assert.rejects(
      client.addMessageFeedback({ messageId: 'msg_01JZZZZZZZZZZZZZZZZZZZZZZZ', value: 'positive' }),
      (error) => error.code === 404 && error.type === 'ResourceNotFound' && /^err_/.test(error.id)
    )
  })
})
