// Browser end-to-end test of dsh-prompt-rewind on the real `dsh web` (rc.8), headless Chromium via playwright-core.
// usage: node tests/web/e2e.mjs <baseUrl> <workspaceDir> <shotsDir> [runDir]    (env CHROMIUM = browser binary)
// Run through scripts/test-web.sh, which installs everything and boots the server.
import { chromium } from 'playwright-core'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

const [baseUrl, ws, shots, runDir = os.tmpdir()] = process.argv.slice(2)
if (!baseUrl || !ws || !shots) throw new Error('usage: e2e.mjs <baseUrl> <workspaceDir> <shotsDir> [runDir]')
fs.mkdirSync(shots, { recursive: true })
for (const f of fs.readdirSync(shots)) if (/\.(png|html|json)$/.test(f)) fs.rmSync(path.join(shots, f))

const T0 = Date.now()
const log = (...a) => console.log(`[${String(Date.now() - T0).padStart(6)} ms]`, ...a)
let step = 0
const shot = async (page, name) => {
  const file = path.join(shots, `${String(++step).padStart(2, '0')}-${name}.png`)
  await page.screenshot({ path: file })
  log('shot', path.basename(file))
}
let checks = 0
const check = (cond, msg) => { if (!cond) throw new Error(`ASSERTION FAILED: ${msg}`); checks++; log('ok:', msg) }
// Development only: DSH_WEB_ALLOW_NO_STORE=1 lets the run go on when the packed addon has no snapshot
// store (file checks are then reported as SKIPPED and the run exits 3, never 0).
const allowNoStore = process.env.DSH_WEB_ALLOW_NO_STORE === '1'
let skippedFileChecks = 0
let storeUnavailable = false
const fileCheck = (cond, msg) => {
  if (storeUnavailable && allowNoStore) { skippedFileChecks++; log('SKIPPED (no snapshot store):', msg); return }
  check(cond, msg)
}
const read = (rel) => { const p = path.join(ws, rel); return fs.existsSync(p) ? fs.readFileSync(p, 'utf8') : null }

const M1 = 'write a.txt alpha-1'
const M2 = 'write a.txt alpha-2; write b.txt beta-2'
const M3 = 'write c.txt gamma-3'
const M4 = 'write d.txt delta-4'

const LAUNCH = {
  executablePath: process.env.CHROMIUM, headless: true, viewport: { width: 1360, height: 900 },
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
}
const profiles = []
async function launch(locale) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dsh-rewind-chromium-'))
  profiles.push(dir)
  const context = await chromium.launchPersistentContext(dir, { ...LAUNCH, locale, permissions: ['clipboard-read', 'clipboard-write'] })
  const page = context.pages()[0] ?? await context.newPage()
  page.pageErrors = []
  page.on('pageerror', e => { page.pageErrors.push(e.message); log('pageerror:', e.message) })
  page.on('console', m => { if (m.type() === 'error') log('console.error:', m.text().slice(0, 300)) })
  return { context, page }
}

async function dismissModals(page) {
  for (const name of ['Continue', 'Configure later', '继续', '稍后配置']) {
    const b = page.getByRole('button', { name, exact: true })
    if (await b.count() && await b.first().isVisible()) { await b.first().click(); await page.waitForTimeout(300) }
  }
}

async function openWorkspace(page) {
  const composer = page.locator('textarea[data-phase]')
  const chooser = page.getByText('Choose workspace', { exact: true })
  await chooser.or(composer).first().waitFor({ timeout: 30000 })
  if (await chooser.isVisible()) {
    await chooser.click()
    const dlg = page.getByRole('dialog', { name: 'Select Workspace Directory' })
    await dlg.getByRole('button', { name: 'Edit path' }).click()
    await dlg.locator('input').first().fill(ws)
    await dlg.locator('input').first().press('Enter')
    await page.waitForTimeout(300)
    await dlg.getByRole('button', { name: 'Open', exact: true }).click()
    await dlg.waitFor({ state: 'detached' })
  }
  await composer.waitFor()
  return composer
}

const visibleUserRows = (page) => page.evaluate(() => Array.from(document.querySelectorAll('[data-chat-flow-kind="user"]'))
  .filter(e => e.offsetParent !== null).map(e => e.innerText.split('\n')[0].trim()))
const visibleTexts = (page) => page.evaluate(() => Array.from(document.querySelectorAll('[data-chat-flow-kind]'))
  .filter(e => e.offsetParent !== null).map(e => `${e.getAttribute('data-chat-flow-kind')}: ${e.innerText.replace(/\s+/g, ' ').slice(0, 80)}`))

async function send(page, composer, text, done) {
  await composer.fill(text)
  await composer.press('Enter')
  await page.getByText(done, { exact: false }).last().waitFor({ timeout: 30000 })
  await page.waitForFunction(() => { const c = document.querySelector('textarea[data-phase]'); return c && c.value === '' }, null, { timeout: 10000 })
}

function userRow(page, text) {
  return page.locator('[data-chat-flow-kind="user"]').filter({ hasText: text })
}

async function openRewindDialog(page, text) {
  const row = userRow(page, text).first()
  await row.hover()
  const button = row.locator('[data-testid="dsh-prompt-rewind-button"]')
  await button.waitFor({ state: 'attached', timeout: 10000 })
  await button.click({ force: true })
  const dialog = page.getByTestId('dsh-prompt-rewind-dialog')
  await dialog.waitFor({ timeout: 10000 })
  return dialog
}

const probe = (page) => page.evaluate(() => window.__dshPromptRewind)

let failed = null
const main = await launch('en-US')
const { page } = main
try {
  await page.goto(baseUrl)
  await page.getByText('Choose workspace').or(page.getByRole('button', { name: 'Continue', exact: true })).first().waitFor({ timeout: 30000 })
  await dismissModals(page)
  const p0 = await probe(page)
  log('probe at boot:', JSON.stringify(p0))
  check(p0?.applied >= 1, 'the client half is loaded and applied')
  const composer = await openWorkspace(page)
  await page.waitForTimeout(300)
  const p1 = await probe(page)
  log('surfaces:', JSON.stringify(p1.surfaces), 'missing services:', JSON.stringify(p1.missing), 'locale:', p1.locale)

  // --- three turns that edit files
  await send(page, composer, M1, 'DONE: a.txt')
  check(read('a.txt') === 'alpha-1\n', 'turn 1 wrote a.txt')
  await send(page, composer, M2, 'DONE: a.txt, b.txt')
  check(read('a.txt') === 'alpha-2\n' && read('b.txt') === 'beta-2\n', 'turn 2 rewrote a.txt and created b.txt')
  await send(page, composer, M3, 'DONE: c.txt')
  check(read('c.txt') === 'gamma-3\n', 'turn 3 created c.txt')
  fs.writeFileSync(path.join(shots, 'dom-conversation.html'), await page.content())
  log('rows:', JSON.stringify(await visibleTexts(page)))
  const buttons = await page.locator('[data-testid="dsh-prompt-rewind-button"]').count()
  check(buttons === 3, `one ↶ button per human message (${buttons})`)
  await userRow(page, M2).first().hover()
  await shot(page, 'conversation')

  // --- ↶ on the middle message: impact list, focus, Esc
  let dialog = await openRewindDialog(page, M2)
  await dialog.getByTestId('dsh-prompt-rewind-impact').or(dialog.getByTestId('dsh-prompt-rewind-impact-error')).waitFor({ timeout: 10000 })
  const focused = await page.evaluate(() => document.activeElement?.getAttribute('data-testid'))
  check(focused === 'dsh-prompt-rewind-cancel', 'Cancel has the focus first')
  const impact = await dialog.innerText()
  log('dialog text:', JSON.stringify(impact))
  await shot(page, 'confirm-dialog')
  storeUnavailable = await dialog.getByTestId('dsh-prompt-rewind-store-unavailable').count() > 0
  const listed = async (id) => (await dialog.getByTestId(id).count()) > 0 ? dialog.getByTestId(id).innerText() : ''
  fileCheck((await listed('dsh-prompt-rewind-writes')).includes('a.txt'), 'impact: a.txt will be restored')
  const deletes = await listed('dsh-prompt-rewind-deletes')
  fileCheck(deletes.includes('b.txt') && deletes.includes('c.txt'), 'impact: b.txt and c.txt will be deleted')
  await page.keyboard.press('Escape')
  await dialog.waitFor({ state: 'detached', timeout: 5000 })
  check(read('b.txt') === 'beta-2\n', 'Esc cancelled: nothing changed on disk')

  // --- reopen, Ctrl+Enter confirms
  dialog = await openRewindDialog(page, M2)
  await dialog.getByTestId('dsh-prompt-rewind-impact').waitFor({ timeout: 10000 })
  await page.keyboard.press('Control+Enter')
  await dialog.waitFor({ state: 'detached', timeout: 20000 })
  const p2 = await probe(page)
  log('events:', JSON.stringify(p2.events.slice(-2)))
  const rewound = p2.events.filter(e => e.type === 'rewind').at(-1)
  check(rewound?.ok === true, `the engine command succeeded: ${JSON.stringify(rewound?.text ?? rewound?.message)}`)
  await page.waitForFunction(() => (window.__dshPromptRewind?.hidden ?? []).length > 0, null, { timeout: 10000 })
  await page.waitForTimeout(300)
  const users = await visibleUserRows(page)
  log('visible rows after rewind:', JSON.stringify(await visibleTexts(page)))
  check(users.length === 1 && users[0].includes(M1), `the transcript ends at the message before the target (${JSON.stringify(users)})`)
  check(await page.getByText('DONE: a.txt, b.txt').filter({ visible: true }).count() === 0, 'the target turn\'s reply is hidden')
  const draft = await composer.inputValue()
  check(draft === M2, `the composer is refilled with the target's text (${JSON.stringify(draft)})`)
  fileCheck(read('a.txt') === 'alpha-1\n' && read('b.txt') === null && read('c.txt') === null, 'files on disk: a.txt restored, b.txt and c.txt deleted')
  await shot(page, 'after-rewind')
  check(page.pageErrors.length === 0, 'no page errors')
} catch (e) {
  failed = e
  console.error('E2E FAILED:', e.stack ?? e.message)
  try { await page.screenshot({ path: path.join(shots, 'failure.png') }); fs.writeFileSync(path.join(shots, 'failure.html'), await page.content()) } catch {}
} finally {
  await main.context.close()
  for (const dir of profiles) fs.rmSync(dir, { recursive: true, force: true })
}
log(`${checks} checks passed${failed ? ', then a failure' : ''}${skippedFileChecks ? `; ${skippedFileChecks} file checks SKIPPED (no snapshot store)` : ''}`)
process.exit(failed ? 1 : skippedFileChecks > 0 ? 3 : 0)
