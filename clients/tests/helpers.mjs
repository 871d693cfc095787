// What every test file shares: the seeded demo (DEMO_JSON), clients built
// the way the official packages document them, and small waiting helpers.
import { readFileSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import assert from 'node:assert/strict'
import { Client } from '@botpress/client'
import * as chat from '@botpress/chat'

function demoFixtures() {
  const path = process.env.DEMO_JSON
  if (!path) {
    throw new Error('DEMO_JSON is not set: run the suite through .ci/with-live-server (make test-clients)')
  }
  return JSON.parse(readFileSync(path, 'utf8'))
}

export const demo = demoFixtures()
export const BASE_URL = process.env.BASE_URL ?? demo.baseUrl
export const CHAT_URL = process.env.CHAT_URL ?? demo.chatUrl
/** The chat interface of the demo bot's connection, as `apiUrl` of @botpress/chat. */
export const CHAT_API_URL = `${CHAT_URL}/${demo.webhookId}`

/** A suffix that no earlier run (nor another test file of this run) used. */
export const unique = (prefix = 'suite') => `${prefix}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`

/** @botpress/client on the runtime API: Bearer token and x-bot-id. */
export const runtimeClient = (role = 'developer', botId = demo.botId) =>
  new Client({ apiUrl: BASE_URL, token: demo.tokens[role], botId })

/** @botpress/client on the admin API: Bearer token and x-workspace-id. */
export const adminClient = (role = 'developer', workspaceId = demo.workspaceId) =>
  new Client({ apiUrl: BASE_URL, token: demo.tokens[role], workspaceId })

/** @botpress/chat, connected as a new user (or as `props` say). */
export const chatConnect = (props = {}) => chat.Client.connect({ apiUrl: CHAT_API_URL, ...props })

export const ID = (prefix) => new RegExp(`^${prefix}_[0-9A-HJKMNP-TV-Z]{26}$`)
export const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Calls `read` until `done(value)` holds, and returns that value; fails after `timeoutMs`. */
export async function waitFor(read, done, { timeoutMs = 30_000, intervalMs = 250, what = 'the condition' } = {}) {
  const deadline = Date.now() + timeoutMs
  let last
  while (Date.now() < deadline) {
    last = await read()
    if (done(last)) {
      return last
    }
    await sleep(intervalMs)
  }
  assert.fail(`${what} did not hold within ${timeoutMs} ms; last value: ${JSON.stringify(last)}`)
}

/**
 * Asserts that `call` rejects with the client's error class `ErrorClass` and
 * the contract's error body (`code`, `type`, an `err_` id, a message).
 */
export async function rejectsWith(call, ErrorClass, code) {
  await assert.rejects(call, (thrown) => {
    assert.ok(thrown instanceof ErrorClass, `expected ${ErrorClass.name}, got ${thrown?.constructor?.name}: ${thrown?.message}`)
    assert.equal(thrown.isApiError, true)
    assert.equal(thrown.code, code)
    assert.match(thrown.id, /^err_/)
    assert.ok(thrown.message.length > 0)
    return true
  })
}

/**
 * The next signal of `type` on a @botpress/chat SignalListener for which
 * `matches(data)` holds; fails after `timeoutMs`, or on the listener's error.
 */
export function nextSignal(listener, type, matches = () => true, timeoutMs = 15_000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      listener.off(type, onSignal)
      reject(new Error(`no ${type} signal within ${timeoutMs} ms`))
    }, timeoutMs)
    const onSignal = (data) => {
      if (!matches(data)) {
        return
      }
      clearTimeout(timer)
      listener.off(type, onSignal)
      resolve(data)
    }
    listener.on(type, onSignal)
    listener.once('error', (err) => {
      clearTimeout(timer)
      reject(err)
    })
  })
}
