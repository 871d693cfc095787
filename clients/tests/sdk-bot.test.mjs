// A real bot written with the official SDK (@botpress/sdk: examples/sdk_bot,
// started here as its own Node process) registered as the demo bot in
// `botpress` delivery format. An end user talks to it with @botpress/chat and
// hears its replies on the live stream; its conversation state (a counter)
// survives the bot process being restarted; its user state expires and the
// bot is told so (state_expired), which it says in the conversation.
import { describe, it, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import * as client from '@botpress/client'
import { BASE_URL, demo, runtimeClient, chatConnect, nextSignal, rejectsWith, waitFor } from './helpers.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const exampleDir = join(here, '..', '..', 'examples', 'sdk_bot')
const SESSION_EXPIRY_MS = 2_000

const freePort = async () => {
  const server = createServer().listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address()
  server.close()
  await once(server, 'close')
  return port
}

/** The example bot as its own process; resolves once it listens. */
async function startBot(port) {
  const child = spawn(process.execPath, [join(exampleDir, 'bot.mjs')], {
    cwd: exampleDir,
    env: {
      ...process.env,
      BP_API_URL: BASE_URL,
      BP_TOKEN: demo.tokens.developer,
      PORT: String(port),
      SESSION_EXPIRY_MS: String(SESSION_EXPIRY_MS),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  child.output = ''
  const keep = (chunk) => {
    child.output += chunk.toString()
  }
  child.stdout.on('data', keep)
  child.stderr.on('data', keep)
  await waitFor(
    async () => child.exitCode !== null || /Listening on port/.test(child.output),
    Boolean,
    { timeoutMs: 20_000, what: 'the SDK bot to listen' }
  )
  assert.equal(child.exitCode, null, `the SDK bot exited:\n${child.output}`)
  return child
}

async function stopBot(child) {
  if (child.exitCode !== null) return
  child.kill('SIGTERM')
  await once(child, 'exit')
}

/** PUT /v1/admin/bots/{id} with fields the official client's updateBot does not send. */
async function updateDemoBot(fields) {
  const response = await fetch(`${BASE_URL}/v1/admin/bots/${demo.botId}`, {
    method: 'PUT',
    headers: {
      Authorization: `Bearer ${demo.tokens.developer}`,
      'x-workspace-id': demo.workspaceId,
      'Content-Type': 'application/json',
    },
    body: JSON.stringify(fields),
  })
  const text = await response.text()
  assert.equal(response.status, 200, text)
  return JSON.parse(text).bot
}

describe('a bot written with the official SDK', { timeout: 120_000 }, () => {
  let port
  let bot
  let user
  let conversationId
  let listener
  const runtime = runtimeClient()

  const botSays = (text) =>
    nextSignal(listener, 'message_created', (m) => m.isBot && m.payload.text === text, 30_000)

  before(async () => {
    port = await freePort()
    bot = await startBot(port)
    const updated = await updateDemoBot({ deliveryFormat: 'botpress', url: `http://127.0.0.1:${port}/`, maxExecutionTime: 30 })
    assert.equal(updated.deliveryFormat, 'botpress')
    user = await chatConnect()
    ;({ conversation: { id: conversationId } } = await user.createConversation({}))
    listener = await user.listenConversation({ id: conversationId })
  })

  after(async () => {
    await listener?.disconnect()
    await stopBot(bot)
    // The demo bot as the seed left it, for whatever runs next.
    await updateDemoBot({ deliveryFormat: 'standard', url: demo.webhookUrl || null, maxExecutionTime: null })
  })

  it('pins the SDK the suite runs at the example bot', () => {
    const pins = (path) => {
      const { dependencies, overrides } = JSON.parse(readFileSync(path, 'utf8'))
      return { sdk: dependencies['@botpress/sdk'], overrides }
    }
    assert.deepEqual(pins(join(exampleDir, 'package.json')), pins(join(here, '..', 'package.json')))
  })

  it('hears an end user and answers on the live stream', async () => {
    const reply = botSays('You said: Hello (message 1)')
    await user.createMessage({ conversationId, payload: { type: 'text', text: 'Hello' } })
    const message = await reply
    assert.equal(message.conversationId, conversationId)
  })

  it('keeps a counter in conversation state', async () => {
    const reply = botSays('You said: Again (message 2)')
    await user.createMessage({ conversationId, payload: { type: 'text', text: 'Again' } })
    await reply
    // A conversation made without a chosen id has the same id in the chat
    // interface and in the runtime API.
    const { state } = await runtime.getState({ type: 'conversation', id: conversationId, name: 'counter' })
    assert.deepEqual(state.payload, { count: 2 })
    assert.equal(state.type, 'conversation')
    assert.equal(state.conversationId, conversationId)
  })

  it('finds its state again after the bot process restarts', async () => {
    await stopBot(bot)
    bot = await startBot(port)
    const reply = botSays('You said: Still there? (message 3)')
    await user.createMessage({ conversationId, payload: { type: 'text', text: 'Still there?' } })
    await reply
  })

  it('is told when a user state expires, and says so', async () => {
    // The last message set the session state with an expiry of 2 s of idleness.
    const ended = botSays('Your session ended (last: Still there?)')
    const message = await ended
    assert.equal(message.conversationId, conversationId)
    await rejectsWith(
      () => runtime.getState({ type: 'user', id: user.user.id, name: 'session' }),
      client.ResourceNotFoundError,
      404
    )
  })

  it('every delivery of its events succeeded, once', async () => {
    const messages = await waitFor(
      async () => (await runtime.listEvents({ conversationId })).events,
      (all) => all.length === 3 && all.every((event) => event.status === 'processed'),
      { what: "the conversation's three message_created events to be processed" }
    )
    assert.deepEqual(new Set(messages.map((event) => event.type)), new Set(['message_created']))
    // The bot answers state_expired with a message before its HTTP answer
    // reaches the worker, so the event may still be pending when the message
    // is heard. An earlier message's session expires too when what comes
    // between it and the next message (the bot's restart) takes longer than
    // its 2 s on a slow machine: one event for each session that expired.
    const lastText = (event) => event.payload.state.payload.lastText
    const expired = await waitFor(
      async () => (await runtime.listEvents({ userId: user.user.id, type: 'state_expired' })).events,
      (all) =>
        all.every((event) => event.status === 'processed') &&
        all.some((event) => lastText(event) === 'Still there?'),
      { what: 'the state_expired events to be processed' }
    )
    const texts = expired.map(lastText)
    assert.equal(texts.filter((text) => text === 'Still there?').length, 1, texts)
    assert.equal(new Set(texts).size, texts.length, texts)
    assert.ok(texts.every((text) => ['Hello', 'Again', 'Still there?'].includes(text)), texts)
    const last = expired.find((event) => lastText(event) === 'Still there?')
    assert.equal(last.payload.state.name, 'session')
    assert.deepEqual(last.payload.state.payload, { conversationId, lastText: 'Still there?' })
  })
})
