// @botpress/client on the admin API: bots (listBots and its iterator,
// getBot, createBot, updateBot, deleteBot, with the webhook URL as the
// client's `url`) and the typed errors it raises.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import {
  Client,
  ForbiddenError,
  InvalidIdentifierError,
  InvalidPayloadError,
  ResourceNotFoundError,
  UnauthorizedError,
} from '@botpress/client'
import { BASE_URL, demo, adminClient, runtimeClient, unique, ID, TIMESTAMP, waitFor, rejectsWith } from './helpers.mjs'

const client = adminClient('developer')

describe('admin bots', { timeout: 60_000 }, () => {
  it('lists the workspace bots, and only them', async () => {
    const bots = await client.list.bots({}).collect()
    const ids = bots.map((b) => b.id)
    assert.ok(ids.includes(demo.botId))
    assert.ok(!ids.includes(demo.otherBotId), "another workspace's bot is not listed")
    const seeded = bots.find((b) => b.id === demo.botId)
    assert.equal(seeded.name, 'Demo bot')
    assert.match(seeded.createdAt, TIMESTAMP)
    assert.match(seeded.updatedAt, TIMESTAMP)
    assert.equal(typeof seeded.tags, 'object')
  })

  it('creates, gets, updates and deletes a bot', async () => {
    const name = unique('Support bot')
    const { bot } = await client.createBot({ name, tags: { team: 'support' }, dev: true })
    assert.match(bot.id, ID('bot'))
    assert.equal(bot.name, name)
    assert.deepEqual(bot.tags, { team: 'support' })
    assert.equal(bot.dev, true)
    assert.match(bot.createdAt, TIMESTAMP)

    const { bot: read } = await client.getBot({ id: bot.id })
    assert.equal(read.id, bot.id)
    assert.equal(read.name, name)
    assert.deepEqual(read.tags, { team: 'support' })

    const { bot: updated } = await client.updateBot({ id: bot.id, name: `${name} v2`, tags: { team: 'sales' } })
    assert.equal(updated.name, `${name} v2`)
    assert.deepEqual(updated.tags, { team: 'sales' })
    assert.equal(updated.dev, true, 'what the update does not name stays')
    assert.ok(updated.updatedAt >= bot.updatedAt)

    assert.deepEqual(await client.deleteBot({ id: bot.id }), {})
    await rejectsWith(() => client.getBot({ id: bot.id }), ResourceNotFoundError, 404)
    const after = await client.list.bots({}).collect()
    assert.ok(!after.some((b) => b.id === bot.id))
  })

  it("sets, changes and clears the bot's webhook URL as the client's url", async () => {
    const { bot } = await client.createBot({ name: unique('Hooked bot'), url: 'https://hooks.example.test/in' })
    assert.equal(bot.url, 'https://hooks.example.test/in')
    assert.equal((await client.getBot({ id: bot.id })).bot.url, 'https://hooks.example.test/in')

    const { bot: moved } = await client.updateBot({ id: bot.id, url: 'http://localhost:8080/hook' })
    assert.equal(moved.url, 'http://localhost:8080/hook')
    assert.equal(moved.name, bot.name, 'what the update does not name stays')

    const { bot: cleared } = await client.updateBot({ id: bot.id, url: null })
    assert.equal(cleared.url, undefined, 'a bot without a webhook has no url')
    await client.updateBot({ id: bot.id, url: 'https://hooks.example.test/again' })
    assert.equal((await client.updateBot({ id: bot.id, url: '' })).bot.url, undefined)

    await rejectsWith(() => client.updateBot({ id: bot.id, url: 'ftp://example.test/hook' }), InvalidPayloadError, 400)
    await rejectsWith(() => client.createBot({ name: 'x', url: 'not a url' }), InvalidPayloadError, 400)
    await client.deleteBot({ id: bot.id })
  })

  it('filters on tags and dev, newest first, page by page', async () => {
    const group = unique('group')
    const made = []
    for (let n = 0; n < 3; n++) {
      made.push((await client.createBot({ name: `${group} ${n}`, tags: { group }, dev: n !== 1 })).bot.id)
    }
    const first = await client.listBots({ tags: { group }, pageSize: 2 })
    assert.deepEqual(first.bots.map((b) => b.id), [made[2], made[1]])
    assert.equal(typeof first.meta.nextToken, 'string')
    const walked = await client.list.bots({ tags: { group }, pageSize: 1 }).collect()
    assert.deepEqual(walked.map((b) => b.id), [...made].reverse())
    const oldestFirst = await client.list.bots({ tags: { group }, sortField: 'createdAt', sortDirection: 'asc' }).collect()
    assert.deepEqual(oldestFirst.map((b) => b.id), made)
    const devOnly = await client.list.bots({ tags: { group }, dev: true }).collect()
    assert.deepEqual(devOnly.map((b) => b.id), [made[2], made[0]])
    for (const id of made) {
      await client.deleteBot({ id })
    }
  })

  it("reads a bot's delivery logs with getBotLogs", async () => {
    const timeStart = new Date(Date.now() - 60_000).toISOString()
    const { event } = await runtimeClient('developer').createEvent({ type: unique('logged'), payload: {} })
    // The demo bot's webhook is the echo bot's address: the first attempt is logged, whatever it answers.
    const { logs } = await waitFor(
      () => client.getBotLogs({ id: demo.botId, timeStart, timeEnd: new Date(Date.now() + 60_000).toISOString() }),
      (answer) => answer.logs.some((log) => log.eventId === event.id),
      { timeoutMs: 30_000, what: "the event's first delivery attempt in the logs" }
    )
    const log = logs.find((entry) => entry.eventId === event.id)
    assert.match(log.timestamp, TIMESTAMP)
    assert.ok(['info', 'warn', 'error'].includes(log.level), log.level)
    assert.match(log.message, new RegExp(event.id))
    const stamps = logs.map((entry) => entry.timestamp)
    assert.deepEqual(stamps, [...stamps].sort().reverse(), 'newest first')
  })

  describe('errors', () => {
    it('an unknown bot is ResourceNotFound; so is a bot of another workspace', async () => {
      await rejectsWith(() => client.getBot({ id: 'bot_01J0000000000000000000000X' }), ResourceNotFoundError, 404)
      await rejectsWith(() => client.getBot({ id: demo.otherBotId }), ResourceNotFoundError, 404)
    })

    it('what cannot be a bot id is InvalidIdentifier', async () => {
      await rejectsWith(() => client.getBot({ id: 'my-bot' }), InvalidIdentifierError, 400)
    })

    it('a field the service does not know is InvalidPayload', async () => {
      await rejectsWith(() => client.createBot({ name: 'x', secrets: { a: 'b' } }), InvalidPayloadError, 400)
    })

    it('a viewer lists and reads bots but may not create one', async () => {
      const viewer = adminClient('viewer')
      const { bot } = await viewer.getBot({ id: demo.botId })
      assert.equal(bot.id, demo.botId)
      await rejectsWith(() => viewer.createBot({ name: 'no' }), ForbiddenError, 403)
      await rejectsWith(() => viewer.updateBot({ id: demo.botId, name: 'no' }), ForbiddenError, 403)
      await rejectsWith(() => viewer.deleteBot({ id: demo.botId }), ForbiddenError, 403)
    })

    it('billing may not list bots', async () => {
      await rejectsWith(() => adminClient('billing').listBots({}), ForbiddenError, 403)
    })

    it('a token of no member of the workspace is Unauthorized', async () => {
      const outsider = new Client({ apiUrl: BASE_URL, token: demo.outsiderToken, workspaceId: demo.workspaceId })
      await rejectsWith(() => outsider.listBots({}), UnauthorizedError, 401)
    })
  })
})
