// @botpress/client on the admin API: workspace members (listWorkspaceMembers
// and its iterator, getWorkspaceMember, createWorkspaceMember,
// updateWorkspaceMember, deleteWorkspaceMember) answered in the shapes the
// client types, and the typed errors it raises.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import {
  AlreadyExistsError,
  ForbiddenError,
  InvalidIdentifierError,
  InvalidPayloadError,
  ResourceNotFoundError,
} from '@botpress/client'
import { demo, adminClient, unique, ID, TIMESTAMP, rejectsWith } from './helpers.mjs'

const ROLES = ['owner', 'administrator', 'manager', 'developer', 'viewer', 'billing']
// The client's workspace member: {id, userId?, email, createdAt, role, profilePicture?, displayName?}.
const MEMBER_KEYS = ['id', 'userId', 'email', 'createdAt', 'role', 'profilePicture', 'displayName']

function assertMember(member) {
  for (const key of Object.keys(member)) {
    assert.ok(MEMBER_KEYS.includes(key), `a member has no ${key}: ${JSON.stringify(member)}`)
  }
  assert.match(member.id, ID('member'))
  assert.equal(typeof member.email, 'string')
  assert.match(member.createdAt, TIMESTAMP)
  assert.ok(ROLES.includes(member.role), member.role)
}

const newAddress = () => `${unique('member')}@example.test`

describe('admin workspace members', { timeout: 60_000 }, () => {
  it('lists the members page by page, each in the shape the client types', async () => {
    const client = adminClient('developer')
    const first = await client.listWorkspaceMembers({ pageSize: 2 })
    assert.deepEqual(Object.keys(first).sort(), ['members', 'meta'])
    assert.equal(first.members.length, 2)
    assert.equal(typeof first.meta.nextToken, 'string')
    const members = await client.list.workspaceMembers({ pageSize: 2 }).collect()
    members.forEach(assertMember)
    assert.deepEqual(members.slice(0, 2).map((m) => m.id), first.members.map((m) => m.id))
    const roles = new Set(members.map((m) => m.role))
    for (const role of ROLES) {
      assert.ok(roles.has(role), `the demo workspace has a ${role}`)
    }
    assert.equal(new Set(members.map((m) => m.id)).size, members.length, 'no member twice')
  })

  it("getWorkspaceMember answers the caller's own membership", async () => {
    for (const role of ['developer', 'billing']) {
      const me = await adminClient(role).getWorkspaceMember({})
      assertMember(me)
      assert.equal(me.role, role)
    }
  })

  it('adds a member by e-mail, changes its role and removes it', async () => {
    const client = adminClient('administrator')
    const email = newAddress()
    const added = await client.createWorkspaceMember({ email, role: 'viewer', sendEmail: false })
    assertMember(added)
    assert.equal(added.email, email)
    assert.equal(added.role, 'viewer')

    const listed = await client.list.workspaceMembers({}).collect()
    assert.deepEqual(listed.find((m) => m.id === added.id), added)

    const changed = await client.updateWorkspaceMember({ id: added.id, role: 'developer' })
    assertMember(changed)
    assert.equal(changed.id, added.id)
    assert.equal(changed.role, 'developer')

    const unchanged = await client.updateWorkspaceMember({ id: added.id })
    assert.deepEqual(unchanged, changed, 'an update that names no role changes nothing')

    assert.deepEqual(await client.deleteWorkspaceMember({ id: added.id }), {})
    await rejectsWith(() => client.updateWorkspaceMember({ id: added.id, role: 'viewer' }), ResourceNotFoundError, 404)
    const after = await client.list.workspaceMembers({}).collect()
    assert.ok(!after.some((m) => m.id === added.id))
  })

  describe('errors', () => {
    it('a member already is AlreadyExists', async () => {
      const client = adminClient('administrator')
      const email = newAddress()
      const added = await client.createWorkspaceMember({ email, role: 'viewer' })
      await rejectsWith(() => client.createWorkspaceMember({ email, role: 'developer' }), AlreadyExistsError, 409)
      await client.deleteWorkspaceMember({ id: added.id })
    })

    it('a bad address or role is InvalidPayload', async () => {
      const client = adminClient('administrator')
      await rejectsWith(() => client.createWorkspaceMember({ email: 'not-an-address', role: 'viewer' }), InvalidPayloadError, 400)
      await rejectsWith(() => client.createWorkspaceMember({ email: newAddress(), role: 'boss' }), InvalidPayloadError, 400)
    })

    it('what cannot be a member id is InvalidIdentifier; a missing member is ResourceNotFound', async () => {
      const client = adminClient('administrator')
      await rejectsWith(() => client.updateWorkspaceMember({ id: 'ann', role: 'viewer' }), InvalidIdentifierError, 400)
      await rejectsWith(() => client.deleteWorkspaceMember({ id: 'member_01J0000000000000000000000X' }), ResourceNotFoundError, 404)
    })

    it('only an owner or administrator manages members; only an owner makes an owner', async () => {
      await rejectsWith(() => adminClient('manager').createWorkspaceMember({ email: newAddress(), role: 'viewer' }), ForbiddenError, 403)
      await rejectsWith(() => adminClient('administrator').createWorkspaceMember({ email: newAddress(), role: 'owner' }), ForbiddenError, 403)
      const me = await adminClient('developer').getWorkspaceMember({})
      await rejectsWith(() => adminClient('developer').updateWorkspaceMember({ id: me.id, role: 'viewer' }), ForbiddenError, 403)
      assert.equal((await adminClient('owner').getWorkspaceMember({})).role, 'owner')
    })
  })
})

describe('admin audit records', { timeout: 60_000 }, () => {
  const ACTIONS = [
    'UNKNOWN', 'ADD_WORKSPACE_MEMBER', 'REMOVE_WORKSPACE_MEMBER', 'UPDATE_WORKSPACE_MEMBER', 'CLOSE_WORKSPACE',
    'CREATE_BOT', 'CREATE_WORKSPACE', 'DELETE_BOT', 'DEPLOY_BOT', 'TRANSFER_BOT', 'DOWNLOAD_BOT_ARCHIVE',
    'UPDATE_BOT', 'UPDATE_BOT_CHANNEL', 'UPDATE_BOT_CONFIG', 'UPDATE_PAYMENT_METHOD', 'UPDATE_WORKSPACE',
    'SET_SPENDING_LIMIT', 'SET_AI_SPENDING_LIMIT', 'UPDATE_WORKSPACE_BILLING_READONLY', 'UPDATE_WORKSPACE_PLAN_READONLY',
    'UPDATE_WORKSPACE_ADDONS_READONLY', 'EXECUTE_AUTO_RECHARGE_SUCCESS', 'EXECUTE_AUTO_RECHARGE_FAILED',
  ]
  const RECORD_KEYS = ['id', 'recordedAt', 'userId', 'userEmail', 'resourceId', 'resourceName', 'value', 'action']

  function assertRecord(record) {
    for (const key of Object.keys(record)) {
      assert.ok(RECORD_KEYS.includes(key), `a record has no ${key}: ${JSON.stringify(record)}`)
    }
    assert.match(record.id, ID('audit'))
    assert.match(record.recordedAt, TIMESTAMP)
    assert.ok(record.userId === null || typeof record.userId === 'string')
    assert.ok(record.resourceId === null || typeof record.resourceId === 'string')
    assert.ok(ACTIONS.includes(record.action), record.action)
    if (record.value !== undefined && record.value !== null) {
      assert.equal(typeof JSON.parse(record.value), 'object')
    }
  }

  it('records what the admin API changed, newest first, in the shape the client types', async () => {
    const admin = adminClient('administrator')
    const name = unique('Audited bot')
    const { bot } = await admin.createBot({ name })
    await admin.updateBot({ id: bot.id, name: `${name} v2` })
    await admin.deleteBot({ id: bot.id })
    const email = newAddress()
    const member = await admin.createWorkspaceMember({ email, role: 'viewer' })
    await admin.updateWorkspaceMember({ id: member.id, role: 'developer' })
    await admin.deleteWorkspaceMember({ id: member.id })

    const { records, meta } = await adminClient('manager').getAuditRecords({ id: demo.workspaceId, pageSize: 50 })
    assert.equal(typeof meta, 'object')
    records.forEach(assertRecord)
    const stamps = records.map((r) => r.recordedAt)
    assert.deepEqual(stamps, [...stamps].sort().reverse(), 'newest first')

    const me = await admin.getWorkspaceMember({})
    const ofBot = records.filter((r) => r.resourceId === bot.id)
    assert.deepEqual(ofBot.map((r) => r.action), ['DELETE_BOT', 'UPDATE_BOT', 'CREATE_BOT'])
    assert.deepEqual(ofBot.map((r) => r.resourceName), [`${name} v2`, `${name} v2`, name])
    const created = ofBot.at(-1)
    assert.equal(created.userId, me.userId)
    assert.equal(created.userEmail, me.email)
    const ofMember = records.filter((r) => r.resourceId === member.id)
    assert.deepEqual(ofMember.map((r) => r.action), ['REMOVE_WORKSPACE_MEMBER', 'UPDATE_WORKSPACE_MEMBER', 'ADD_WORKSPACE_MEMBER'])
    assert.ok(ofMember.every((r) => r.resourceName === email))
  })

  it('pages with nextToken', async () => {
    const client = adminClient('owner')
    const first = await client.getAuditRecords({ id: demo.workspaceId, pageSize: 1 })
    assert.equal(first.records.length, 1)
    assert.equal(typeof first.meta.nextToken, 'string')
    const second = await client.getAuditRecords({ id: demo.workspaceId, pageSize: 1, nextToken: first.meta.nextToken })
    assert.equal(second.records.length, 1)
    assert.ok(second.records[0].id < first.records[0].id)
  })

  it('another workspace is ResourceNotFound; a developer may not read them', async () => {
    await rejectsWith(() => adminClient('manager').getAuditRecords({ id: 'wkspace_01J0000000000000000000000X' }), ResourceNotFoundError, 404)
    await rejectsWith(() => adminClient('manager').getAuditRecords({ id: 'nope' }), InvalidIdentifierError, 400)
    await rejectsWith(() => adminClient('developer').getAuditRecords({ id: demo.workspaceId }), ForbiddenError, 403)
  })
})
