// A bot written for the hosted platform with the official SDK, as its
// developers write one: nothing in it knows that it runs elsewhere. It
//
// - answers every text message ("You said: … (message N)"), counting the
//   conversation's messages in a conversation state, so the count survives
//   the bot being restarted;
// - keeps a `session` user state that expires after SESSION_EXPIRY_MS of
//   idleness, and says so in the conversation when it does (state_expired).
//
// Run it against this service (docs/guides/sdk-bot.md):
//
//   BP_API_URL=http://127.0.0.1:8000 BP_TOKEN=bp_pat_… PORT=8072 node bot.mjs
//
// and make the bot's deliveryFormat `botpress` with its webhook URL
// http://127.0.0.1:8072/. The SDK's client reads BP_API_URL and BP_TOKEN;
// the bot's id comes with every delivery (x-bot-id).
import * as sdk from '@botpress/sdk'

const PORT = Number(process.env.PORT ?? 8072)
const SESSION_EXPIRY_MS = Number(process.env.SESSION_EXPIRY_MS ?? 30 * 60 * 1000)

const bot = new sdk.Bot({ actions: {}, plugins: {} })

const say = (client, ctx, conversationId, text) =>
  client.createMessage({ conversationId, userId: ctx.botId, tags: {}, type: 'text', payload: { text } })

bot.on.message('text', async ({ message, conversation, user, client, ctx, logger }) => {
  const counter = { type: 'conversation', id: conversation.id, name: 'counter' }
  const { state } = await client.getOrSetState({ ...counter, payload: { count: 0 } })
  const count = state.payload.count + 1
  await client.setState({ ...counter, payload: { count } })
  // Written on every message: it expires once the user has been idle that long.
  await client.setState({
    type: 'user',
    id: user.id,
    name: 'session',
    payload: { conversationId: conversation.id, lastText: message.payload.text },
    expiry: SESSION_EXPIRY_MS,
  })
  logger.info(`message ${count} in ${conversation.id}`)
  await say(client, ctx, conversation.id, `You said: ${message.payload.text} (message ${count})`)
})

bot.on.stateExpired('session', async ({ state, client, ctx, logger }) => {
  logger.info(`session of ${state.userId} expired`)
  await say(client, ctx, state.payload.conversationId, `Your session ended (last: ${state.payload.lastText})`)
})

await bot.start(PORT)
