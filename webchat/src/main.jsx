// The Botpress webchat, full page, talking to this service's chat interface.
// The page says where in <script type="application/json" id="webchat-config">
// ({"apiUrl": CHAT_URL, "clientId": webhook id, "botName"?, "botDescription"?,
// "feedbackEnabled"?, "allowFileUpload"?};
// chat/webchat_page.py writes it), so one bundle serves every bot and nothing
// about a deployment is built in.
import { Webchat } from '@botpress/webchat'
import { StrictMode } from 'react'
import { createRoot } from 'react-dom/client'
import './page.css'

const CONFIG_ELEMENT_ID = 'webchat-config'
const ROOT_ELEMENT_ID = 'webchat-root'

function readConfig() {
  const element = document.getElementById(CONFIG_ELEMENT_ID)
  if (!element) throw new Error(`no <script id="${CONFIG_ELEMENT_ID}"> on the page`)
  const config = JSON.parse(element.textContent)
  // Without an apiUrl the component falls back to the hosted service; refuse
  // rather than send a user's messages to another site.
  if (!/^https?:\/\//.test(config.apiUrl ?? '')) throw new Error('webchat config: apiUrl must be an absolute http(s) URL')
  if (!config.clientId) throw new Error('webchat config: clientId is missing')
  return config
}

function mount() {
  const root = document.getElementById(ROOT_ELEMENT_ID)
  let config
  try {
    config = readConfig()
  } catch (error) {
    root.textContent = `The chat cannot start: ${error.message}`
    throw error
  }
  // Only settings that load nothing: fontFamily would fetch from Google Fonts
  // and additionalStylesheetUrl or botAvatar from wherever they point.
  const configuration = {
    botName: config.botName || undefined,
    botDescription: config.botDescription || undefined,
    // Thumbs on the bot's messages (PUT messages/{id}/feedback) and the
    // paper clip (POST files), as the page allows them.
    feedbackEnabled: Boolean(config.feedbackEnabled),
    allowFileUpload: Boolean(config.allowFileUpload),
  }
  createRoot(root).render(
    <StrictMode>
      <Webchat
        clientId={config.clientId}
        apiUrl={config.apiUrl}
        configuration={configuration}
        style={{ width: '100%', height: '100%' }}
      />
    </StrictMode>,
  )
}

mount()
