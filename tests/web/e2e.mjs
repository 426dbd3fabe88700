// Browser end-to-end test of dsh-prompt-rewind on the real `dsh web` (rc.8), headless Chromium via playwright-core.
// usage: node tests/web/e2e.mjs <baseUrl> <workspaceDir> <shotsDir> [runDir]    (env CHROMIUM = browser binary)
// Run through scripts/test-web.sh, which installs everything and boots the server.
import { chromium } from 'playwright-core'
import fs from 'node:fs'
import { spawnSync } from 'node:child_process'
import os from 'node:os'
import path from 'node:path'

const [baseUrl, ws, shots, runDir = os.tmpdir()] = process.argv.slice(2)
if (!baseUrl || !ws || !shots) throw new Error('usage: e2e.mjs <baseUrl> <workspaceDir> <shotsDir> [runDir]')
fs.mkdirSync(shots, { recursive: true })
// full: the whole feature; degraded: DSH without the command-UI and Plugins-settings client plugins, with
// the plugin run against a uiConversation-shaped chat service (tests/web/ui-conversation-shim.js, a shim
// over the real rc.8 services; E2E_CHAT_SHIM=0 leaves it out);
// crash-setup / crash-banner: a rewind killed by the crash seam, then the banner after a restart;
// git: the workspace is a git repository (the dialog's git line and its "Keep git as it is" box)
const MODE = process.env.E2E_MODE ?? 'full'
const CHAT_SHIM = MODE === 'degraded' && process.env.E2E_CHAT_SHIM !== '0'

const T0 = Date.now()
const log = (...a) => console.log(`[${String(Date.now() - T0).padStart(6)} ms]`, ...a)
let step = 0
const shot = async (page, name) => {
  const file = path.join(shots, `${MODE === 'full' ? '' : `${MODE}-`}${String(++step).padStart(2, '0')}-${name}.png`)
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
/**
 * Wait until the scripted model has answered `prompt` after its tool results (the request that
 * produces the `DONE:` reply; by then every scan around the turn's calls has run). Used for turns
 * whose reply text repeats an earlier one, where waiting for the text alone proves nothing.
 */
const untilAnswered = async (prompt, ms = 30000) => {
  const logFile = path.join(runDir, 'llm.jsonl')
  for (const end = Date.now() + ms; Date.now() < end; await new Promise(r => setTimeout(r, 100))) {
    const lines = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').split('\n').filter(Boolean).map(l => JSON.parse(l)) : []
    if (lines.some(l => l.prompt === prompt.slice(0, 120) && l.results >= 1)) return true
  }
  return false
}

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
  // The first-run notice can mount a moment after the shell: give it a chance to appear.
  await page.getByRole('button', { name: 'Continue', exact: true }).waitFor({ timeout: 2000 }).catch(() => {})
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
    await dismissModals(page)
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

/**
 * Serve the plugin's client bundle with the uiConversation-shaped chat shim in front of it
 * (see tests/web/ui-conversation-shim.js for what it changes).
 */
async function installChatShim(page) {
  const shim = fs.readFileSync(new URL('./ui-conversation-shim.js', import.meta.url), 'utf8')
  let served = 0
  await page.route(/\/plugins\/dsh-prompt-rewind\/client\.js/, async (route) => {
    const response = await route.fetch()
    const body = await response.text()
    const rewritten = body.replace('window.__ModuleLoader__.load({', 'window.__dshPromptRewindChatShim.load({')
    if (rewritten === body) throw new Error('the client bundle has no window.__ModuleLoader__.load({ call to wrap')
    served++
    await route.fulfill({ response, body: `${shim}\n${rewritten}` })
  })
  return () => served
}

/**
 * DSH without ui-commands and ui-settings-plugins: every other surface still works. With the chat
 * shim, the plugin also runs as on a 0.1.5+ client: chat read from the `uiConversation` "chat"
 * view, markers through `uiConversation.events`, no `conversationEvents` or `settingsScope`.
 */
async function degraded(page) {
  const shimServed = CHAT_SHIM ? await installChatShim(page) : () => 0
  await page.goto(baseUrl)
  await page.getByText('Choose workspace').or(page.getByRole('button', { name: 'Continue', exact: true })).first().waitFor({ timeout: 30000 })
  await dismissModals(page)
  const composer = await openWorkspace(page)
  await page.waitForTimeout(300)
  const p = await probe(page)
  log('degraded surfaces:', JSON.stringify(p.surfaces), 'missing:', JSON.stringify(p.missing))
  check(p.missing.includes('commandUi') && !p.surfaces.includes('command-picker'), 'without the command UI service the picker surface is absent')
  check(!p.surfaces.includes('plugins-tab') && !p.surfaces.includes('plugins-item'), 'without the Plugins settings section the Plugins-page cards are absent')
  check(['message-buttons', 'dialog', 'marker-definition', 'settings-section'].every(x => p.surfaces.includes(x)), 'every other surface is mounted')
  if (CHAT_SHIM) {
    check(shimServed() >= 1 && await page.evaluate(() => window.__dshPromptRewindChatShim?.active === true), 'the client bundle was served behind the uiConversation-shaped chat shim')
    check(p.missing.includes('conversationEvents') && p.missing.includes('settingsScope'), 'conversationEvents and settingsScope are absent (the shim hides them)')
    check(p.markerSource === 'uiConversation.events', `markers are read through uiConversation.events (${p.markerSource})`)
  }
  await send(page, composer, M1, 'DONE: a.txt')
  await send(page, composer, M2, 'DONE: a.txt, b.txt')
  const dialog = await openRewindDialog(page, M2)
  await dialog.getByTestId('dsh-prompt-rewind-impact').waitFor({ timeout: 10000 })
  await page.keyboard.press('Control+Enter')
  await dialog.waitFor({ state: 'detached', timeout: 20000 })
  await page.waitForFunction(() => (window.__dshPromptRewind?.hidden ?? []).length > 0, null, { timeout: 10000 })
  await page.waitForTimeout(300)
  const users = await visibleUserRows(page)
  check(users.length === 1 && users[0].includes(M1) && await composer.inputValue() === M2, 'the ↶ rewind still hides the span and refills the composer')
  check(read('a.txt') === 'alpha-1\n' && read('b.txt') === null, 'and restores the files')
  await shot(page, 'after-rewind')
  if (CHAT_SHIM) {
    const after = await probe(page)
    check(after.chat === 'ui-conversation', `the chat is read from the uiConversation "chat" view (${after.chat})`)
    // Missing services are named once the grace period is over; the page never waited on them.
    await page.waitForFunction(() => (window.__dshPromptRewind?.warnings ?? []).length > 0, null, { timeout: 15000 })
    const { warnings } = await probe(page)
    log('warnings:', JSON.stringify(warnings))
    check(warnings.some(w => w.startsWith('client service "settingsScope" is missing')), 'a named console warning for the missing settingsScope')
    check(!warnings.some(w => w.includes('"conversationEvents"')), 'no warning for conversationEvents while uiConversation stands in')
  }
  await page.getByText('Settings', { exact: true }).last().click()
  await page.getByText('Rewind history', { exact: true }).first().click()
  await page.getByTestId('dsh-prompt-rewind-history').getByTestId('dsh-prompt-rewind-entry').first().waitFor({ timeout: 10000 })
  check(await page.getByTestId('dsh-prompt-rewind-config-history').count() === 1, 'the Rewind history page and its config card are there')
  await page.getByTestId('dsh-prompt-rewind-compat').waitFor({ timeout: 10000 })
  check(['ok', 'degraded'].includes(await page.getByTestId('dsh-prompt-rewind-compat').getAttribute('data-kind')), 'the Compatibility block is on the page (the doctor answered)')
  check(await page.getByText('Plugins', { exact: true }).count() === 0, 'the Plugins section itself is gone (not this plugin\'s doing)')
  await shot(page, 'history')
  await page.keyboard.press('Escape')
  check(page.pageErrors.length === 0, 'no page errors')
}

/** A session whose `dsh web` was SIGKILLed in the middle of a rewind (crash seam `rewind:marker-durable`). */
async function crashSetup(page) {
  await page.goto(baseUrl)
  await page.getByText('Choose workspace').or(page.getByRole('button', { name: 'Continue', exact: true })).first().waitFor({ timeout: 30000 })
  await dismissModals(page)
  const composer = await openWorkspace(page)
  await send(page, composer, M1, 'DONE: a.txt')
  await send(page, composer, M2, 'DONE: a.txt, b.txt')
  const dialog = await openRewindDialog(page, M2)
  await dialog.getByTestId('dsh-prompt-rewind-impact').waitFor({ timeout: 10000 })
  await page.keyboard.press('Control+Enter')
  // The host kills itself at the seam: the server stops answering.
  let down = false
  for (let i = 0; i < 120 && !down; i++) {
    down = await fetch(baseUrl).then(() => false, () => true)
    if (!down) await new Promise(r => setTimeout(r, 250))
  }
  check(down, 'dsh web died in the middle of the rewind (crash seam)')
  check(read('a.txt') === 'alpha-2\n' && read('b.txt') === 'beta-2\n', 'no file was restored before the kill')
}

/** The same DSH home after a restart: the banner names the interrupted rewind; Continue finishes it. */
async function crashBanner(page) {
  await page.goto(baseUrl)
  await page.getByText('Choose workspace').or(page.getByRole('button', { name: 'Continue', exact: true })).or(page.locator('textarea[data-phase]')).first().waitFor({ timeout: 30000 })
  await dismissModals(page)
  await openWorkspace(page)
  const banner = page.getByTestId('dsh-prompt-rewind-interrupted')
  // Expand the workspace in the sidebar, then open its sessions one by one.
  for (let round = 0; round < 3; round++) {
    const collapsed = page.locator('[role="treeitem"][aria-expanded="false"]')
    if (await collapsed.count() === 0) break
    await collapsed.first().focus()
    await page.keyboard.press('ArrowRight')
    await page.waitForTimeout(300)
    if (await collapsed.count() > 0) await collapsed.first().click({ position: { x: 14, y: 16 } })
    await page.waitForTimeout(300)
  }
  const items = page.locator('[role="treeitem"]:not([aria-expanded])')
  log('sessions listed:', await items.count())
  for (let i = 0; i < await items.count() && !await banner.isVisible(); i++) {
    await items.nth(i).click()
    await banner.waitFor({ timeout: 8000 }).catch(() => {})
  }
  await banner.waitFor({ timeout: 10000 })
  const text = await banner.innerText()
  log('banner:', JSON.stringify(text))
  check(/A rewind was interrupted\./.test(text) && /Rewind to “write a\.txt alpha-2; write b\.txt beta-2” — no file changed yet/.test(text), 'the session shows the interrupted rewind, naming its message by its text')
  check(await banner.getByTestId('dsh-prompt-rewind-interrupted-continue').isVisible() && await banner.getByTestId('dsh-prompt-rewind-interrupted-rollback').isVisible(), 'Continue and Roll back are offered')
  await shot(page, 'interrupted-banner')
  await banner.getByTestId('dsh-prompt-rewind-interrupted-continue').click()
  const notice = banner.getByTestId('dsh-prompt-rewind-interrupted-notice')
  await notice.waitFor({ timeout: 20000 })
  log('notice:', JSON.stringify(await notice.innerText()))
  check(/^Finished the rewind to “write a\.txt alpha-2; write b\.txt beta-2”: 1 written, 1 deleted\.$/.test(await notice.innerText()), 'Continue finished restoring the files')
  check(read('a.txt') === 'alpha-1\n' && read('b.txt') === null, 'files on disk: a.txt restored, b.txt deleted')
  check(await banner.getByTestId('dsh-prompt-rewind-interrupted-continue').count() === 0, 'the banner no longer offers anything')
  await shot(page, 'interrupted-continued')
  await banner.getByTestId('dsh-prompt-rewind-interrupted-dismiss').click()
  await banner.waitFor({ state: 'detached', timeout: 5000 })
  await page.getByText('Settings', { exact: true }).last().click()
  await page.getByText('Rewind history', { exact: true }).first().click()
  const entry = page.getByTestId('dsh-prompt-rewind-history').getByTestId('dsh-prompt-rewind-entry').first()
  await entry.waitFor({ timeout: 10000 })
  check(await entry.getAttribute('data-outcome') === 'done', 'the history entry shows the outcome: done')
  check(page.pageErrors.length === 0, 'no page errors')
}

/**
 * Git-aware rewind in the browser: the workspace is a git repository; turn one makes a branch with
 * a commit (the real `bash` tool), turn two checks out a tag. The confirm dialog says what happens
 * to git; with "Keep git as it is" unchecked the rewind brings HEAD back to the branch, checked it
 * leaves HEAD where it is (the files come back either way); the history page shows each entry's git
 * line.
 */
async function gitScenario(page) {
  const env = { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t', GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' }
  const git = (...args) => {
    const r = spawnSync('git', args, { cwd: ws, encoding: 'utf8', env })
    if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`)
    return r.stdout.trim()
  }
  git('init', '-q', '-b', 'main')
  for (let i = 0; i < 5; i++) fs.writeFileSync(path.join(ws, `f${i}.txt`), `v1 ${i}\n`)
  git('add', '.')
  git('commit', '-qm', 'one')
  git('tag', 'v1')
  for (let i = 0; i < 5; i++) fs.writeFileSync(path.join(ws, `f${i}.txt`), `v2 ${i}\n`)
  git('commit', '-qam', 'two')
  const head = () => git('rev-parse', '--abbrev-ref', 'HEAD')
  const G1 = 'bash git switch -q -c agent-work && echo agent > agent.txt && git add agent.txt && git commit -qm agent'
  const G2 = 'bash git checkout -q v1'
  const G3 = 'bash git checkout -q --detach v1'

  await page.goto(baseUrl)
  await page.getByText('Choose workspace').or(page.getByRole('button', { name: 'Continue', exact: true })).first().waitFor({ timeout: 30000 })
  await dismissModals(page)
  const composer = await openWorkspace(page)
  await send(page, composer, G1, 'DONE: bash')
  const agentWork = git('rev-parse', 'agent-work')
  await composer.fill(G2)
  await composer.press('Enter')
  check(await untilAnswered(G2), 'turn two answered')
  await page.waitForFunction(() => { const c = document.querySelector('textarea[data-phase]'); return c && c.value === '' }, null, { timeout: 10000 })
  check(head() === 'HEAD' && read('f1.txt') === 'v1 1\n', 'turn two left HEAD detached at v1')

  // Unchecked (the default): the rewind brings HEAD back to the branch.
  let dialog = await openRewindDialog(page, G2)
  const summary = dialog.getByTestId('dsh-prompt-rewind-git-summary')
  await summary.waitFor({ timeout: 10000 })
  log('git line:', JSON.stringify(await summary.innerText()))
  check((await summary.innerText()).startsWith(`Git: HEAD: detached at v1 → agent-work @ ${agentWork.slice(0, 7)}`), 'the dialog says what happens to git')
  const box = dialog.getByTestId('dsh-prompt-rewind-keep-git')
  check(await box.isVisible() && !(await box.isChecked()), '"Keep git as it is" is offered, unchecked')
  await shot(page, 'git-dialog')
  await dialog.getByTestId('dsh-prompt-rewind-confirm').click()
  await dialog.waitFor({ state: 'detached', timeout: 20000 })
  check(head() === 'agent-work' && git('rev-parse', 'HEAD') === agentWork, 'unchecked: HEAD is back on agent-work')
  check(git('status', '--porcelain') === '' && read('f1.txt') === 'v2 1\n', 'unchecked: the files came back, git status is clean')

  // Checked: the files come back, HEAD stays where the agent left it.
  await composer.fill('')
  await composer.fill(G3)
  await composer.press('Enter')
  check(await untilAnswered(G3), 'turn three answered')
  await page.waitForFunction(() => { const c = document.querySelector('textarea[data-phase]'); return c && c.value === '' }, null, { timeout: 10000 })
  check(head() === 'HEAD', 'turn three left HEAD detached again')
  dialog = await openRewindDialog(page, G3)
  await dialog.getByTestId('dsh-prompt-rewind-git-summary').waitFor({ timeout: 10000 })
  await dialog.getByTestId('dsh-prompt-rewind-keep-git').check()
  check(await dialog.getByTestId('dsh-prompt-rewind-keep-git').isChecked(), 'the box is checked')
  await shot(page, 'git-dialog-keep')
  await dialog.getByTestId('dsh-prompt-rewind-confirm').click()
  await dialog.waitFor({ state: 'detached', timeout: 20000 })
  check(head() === 'HEAD' && git('rev-parse', 'HEAD') === git('rev-parse', 'v1'), 'checked: HEAD is left detached at v1')
  check(read('f1.txt') === 'v2 1\n' && read('agent.txt') === 'agent\n', 'checked: the files came back all the same')

  // The history page: the in-place rewind's entry carries its git line.
  await page.getByText('Settings', { exact: true }).last().click()
  await page.getByText('Rewind history', { exact: true }).first().click()
  const entries = page.getByTestId('dsh-prompt-rewind-history').getByTestId('dsh-prompt-rewind-entry')
  await entries.first().waitFor({ timeout: 10000 })
  const lines = await page.getByTestId('dsh-prompt-rewind-entry-git').allInnerTexts()
  log('history git lines:', JSON.stringify(lines))
  check(lines.length === 1 && lines[0].startsWith('Git: HEAD: detached at v1 → agent-work @'), 'the history shows the git line of the rewind that moved HEAD (none for the one that kept git)')
  await shot(page, 'git-history')
  check(page.pageErrors.length === 0, 'no page errors')
}

let failed = null
const main = await launch('en-US')
const { page } = main
try {
  if (MODE === 'degraded') await degraded(page)
  else if (MODE === 'crash-setup') await crashSetup(page)
  else if (MODE === 'crash-banner') await crashBanner(page)
  else if (MODE === 'git') await gitScenario(page)
  else {
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
  fs.writeFileSync(path.join(shots, `${MODE}-dom-conversation.html`), await page.content())
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
  const focusAfter = async (key) => { await page.keyboard.press(key); return page.evaluate(() => document.activeElement?.getAttribute('data-testid')) }
  check(await focusAfter('Tab') === 'dsh-prompt-rewind-fork' && await focusAfter('Tab') === 'dsh-prompt-rewind-confirm' && await focusAfter('Tab') === 'dsh-prompt-rewind-file-check' && await focusAfter('Shift+Tab') === 'dsh-prompt-rewind-confirm',
    'Tab / Shift+Tab keep the focus inside the dialog (Cancel, Fork, Rewind, then the first file\'s checkbox)')
  await dialog.getByTestId('dsh-prompt-rewind-cancel').focus()
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

  // --- Settings → Rewind history: entry, undo, export
  await page.getByText('Settings', { exact: true }).last().click()
  await page.getByText('Rewind history', { exact: true }).first().click()
  const history = page.getByTestId('dsh-prompt-rewind-history')
  await history.waitFor({ timeout: 10000 })
  const entry = history.getByTestId('dsh-prompt-rewind-entry').first()
  await entry.waitFor({ timeout: 10000 })
  const outcome = await entry.getByTestId('dsh-prompt-rewind-outcome').innerText()
  check(['Done', 'Partial', 'Failed'].includes(outcome), `the history lists the rewind with its outcome (${outcome})`)
  fileCheck(outcome === 'Done', 'the rewind is recorded as Done')
  await entry.getByTestId('dsh-prompt-rewind-entry-paths').locator('summary').click()
  const entryPaths = await entry.getByTestId('dsh-prompt-rewind-entry-paths').innerText()
  fileCheck(/Restored \(1\)\s+a\.txt/.test(entryPaths) && /Deleted \(2\)\s+b\.txt\s+c\.txt/.test(entryPaths), `the entry lists its paths (${JSON.stringify(entryPaths)})`)
  const caps = await history.getByTestId('dsh-prompt-rewind-caps').innerText()
  log('caps line:', JSON.stringify(caps))
  check(/Host capabilities/.test(caps), 'the capability line is shown')
  if (storeUnavailable) check(/Not available on this host: .*file checkpointing/.test(caps), 'a missing capability is named')
  // The Compatibility block says what the host's doctor says about this session.
  const compat = history.getByTestId('dsh-prompt-rewind-compat')
  await compat.waitFor({ timeout: 10000 })
  const doctorAnswer = await page.evaluate(async (sessionId) => {
    const r = await fetch('/dsh-rewind/api/doctor', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ sessionId }) })
    return await r.json()
  }, rewound.sessionId)
  log('doctor:', JSON.stringify(doctorAnswer))
  check(doctorAnswer.ok === true && ['ok', 'degraded'].includes(doctorAnswer.value?.overall), 'the host answers the doctor RPC')
  const doctorReport = doctorAnswer.value
  const compatKind = await compat.getAttribute('data-kind')
  const compatHeadline = await compat.getByTestId('dsh-prompt-rewind-compat-headline').innerText()
  const compatShown = await compat.getByTestId('dsh-prompt-rewind-compat-contract').evaluateAll(els => els.map(e => ({ name: e.dataset.name, status: e.dataset.status, text: e.textContent })))
  const notFound = doctorReport.contracts.filter(c => c.status !== 'found')
  log('compatibility block:', compatKind, JSON.stringify(compatHeadline), JSON.stringify(compatShown))
  if (doctorReport.overall === 'ok') {
    check(compatKind === 'ok' && compatHeadline === 'Everything works on this DSH.' && compatShown.length === 0, 'the Compatibility block says everything works, as the doctor does')
  } else {
    check(compatKind === 'degraded' && compatHeadline === 'Some features degrade on this DSH:', 'the Compatibility block says some features degrade, as the doctor does')
    check(JSON.stringify(compatShown.map(c => [c.name, c.status])) === JSON.stringify(notFound.map(c => [c.name, c.status]))
      && compatShown.every((c, i) => c.text.includes(notFound[i].effect)), `the block lists each contract the doctor finds missing or degraded, with its effect (${notFound.length})`)
  }
  check(await compat.getByTestId('dsh-prompt-rewind-compat-fault').count() === doctorReport.faults.length, `the block lists the faults the doctor reports (${doctorReport.faults.length})`)
  const compatMeta = await compat.getByTestId('dsh-prompt-rewind-compat-meta').innerText()
  check(compatMeta.includes(doctorReport.dshVersion === undefined ? 'DSH version not known' : `DSH ${doctorReport.dshVersion}`)
    && (doctorReport.sessionFormat === undefined || compatMeta.includes(`session format ${doctorReport.sessionFormat}`)), `the block names the DSH version and session format (${JSON.stringify(compatMeta)})`)
  await shot(page, 'rewind-history')
  const undo = entry.getByTestId('dsh-prompt-rewind-undo')
  fileCheck(await undo.count() === 1 && await undo.innerText() === 'Undo this rewind', 'the rewind offers "Undo this rewind"')
  if (await undo.count() === 1) {
    await undo.click()
    const notice = history.getByTestId('dsh-prompt-rewind-notice')
    await notice.waitFor({ timeout: 10000 })
    log('undo notice:', JSON.stringify(await notice.innerText()))
    fileCheck(/Files restored/.test(await notice.innerText()) && /continues in a new session/.test(await notice.innerText()), 'the undo reports the files restored and the new session')
    fileCheck(read('a.txt') === 'alpha-2\n' && read('b.txt') === 'beta-2\n' && read('c.txt') === 'gamma-3\n', 'files on disk are back to before the rewind')
    // The conversation as it was before the rewind opens in a new session, composer empty.
    await page.waitForFunction(() => (window.__dshPromptRewind?.events ?? []).some(e => e.type === 'open-session'), null, { timeout: 15000 })
    const opened = (await probe(page)).events.filter(e => e.type === 'open-session').at(-1)
    check(opened.opened === true && opened.sessionId !== (await probe(page)).events.find(e => e.sessionId)?.sessionId, `the undo opened the new session (${opened.sessionId})`)
    await page.keyboard.press('Escape')
    await history.waitFor({ state: 'detached', timeout: 5000 })
    await userRow(page, M3).first().waitFor({ timeout: 15000 })
    await page.waitForTimeout(300)
    const restoredRows = await visibleUserRows(page)
    check(restoredRows.length === 3 && restoredRows[1].includes(M2) && restoredRows[2].includes(M3), `the new session holds the conversation as it was before the rewind (${JSON.stringify(restoredRows)})`)
    check(await composer.inputValue() === '', 'its composer is empty')
    await shot(page, 'undo-new-session')
    // Back to the rewound session: it is unchanged.
    let back = false
    const others = page.locator('[role="treeitem"][aria-selected="false"]')
    for (let i = 0; i < await others.count() && !back; i++) {
      await others.nth(i).click()
      await page.waitForTimeout(500)
      const rows = await visibleUserRows(page)
      back = rows.length === 1 && rows[0].includes(M1)
    }
    check(back, 'the rewound session is still listed and unchanged')
    await page.getByText('Settings', { exact: true }).last().click()
    await page.getByText('Rewind history', { exact: true }).first().click()
    await history.getByTestId('dsh-prompt-rewind-undone').first().waitFor({ timeout: 10000 })
    check(await history.getByTestId('dsh-prompt-rewind-undo').count() === 0, 'an entry is undone once')
    const tree = history.getByTestId('dsh-prompt-rewind-entry').first().getByTestId('dsh-prompt-rewind-tree-undo')
    check(await tree.count() === 1 && await tree.getAttribute('data-session') === opened.sessionId && await tree.getByTestId('dsh-prompt-rewind-tree-open').count() === 1, 'the entry names the session the conversation continues in, openable')
    await shot(page, 'after-undo')
    // Redo: the rewind's file changes again, from the history page; the rewound session (this
    // one) is where its conversation is.
    const redo = history.getByTestId('dsh-prompt-rewind-redo')
    check(await redo.count() === 1 && await redo.innerText() === 'Redo this rewind', 'the undone rewind offers "Redo this rewind"')
    await redo.click()
    await history.getByTestId('dsh-prompt-rewind-notice').filter({ hasText: 'Files as the rewind left them again' }).waitFor({ timeout: 10000 })
    fileCheck(read('a.txt') === 'alpha-1\n' && read('b.txt') === null && read('c.txt') === null, 'the redo made the rewind\'s file changes again')
    await history.getByTestId('dsh-prompt-rewind-tree-redo').first().waitFor({ timeout: 10000 })
    check(await history.getByTestId('dsh-prompt-rewind-redo').count() === 0, 'a rewind is redone once')
    await shot(page, 'after-redo')
  }
  await history.getByTestId('dsh-prompt-rewind-export').click()
  const exported = history.getByTestId('dsh-prompt-rewind-export-json')
  await exported.waitFor({ timeout: 5000 })
  const json = JSON.parse(await exported.inputValue())
  check(Array.isArray(json.entries) && json.entries.length >= 1 && typeof json.entries[0].opId === 'string', `export shows the history as JSON (${json.entries.length} entries)`)
  const clip = await page.evaluate(() => navigator.clipboard.readText().catch(e => `ERR ${e}`))
  check(clip.trim() === (await exported.inputValue()).trim(), 'export copied the same JSON to the clipboard')

  // --- the storage view: this workspace, all workspaces, the biggest sessions, the quota
  const storage = history.getByTestId('dsh-prompt-rewind-storage')
  await storage.waitFor({ timeout: 10000 })
  const bytesOf = async (id) => Number(await storage.getByTestId(id).getAttribute('data-bytes'))
  const wsBytes = await bytesOf('dsh-prompt-rewind-storage-workspace')
  const allBytes = await bytesOf('dsh-prompt-rewind-storage-all')
  log('storage:', JSON.stringify(await storage.innerText()))
  fileCheck(wsBytes > 0 && allBytes >= wsBytes, `the storage view shows this workspace's and all workspaces' backups (${wsBytes} B of ${allBytes} B)`)
  fileCheck(/^This workspace: [\d.]+ (B|KiB|MiB) \(\d+ session\(s\), its scan baseline included\)$/.test(await storage.getByTestId('dsh-prompt-rewind-storage-workspace').innerText()), 'the workspace figure is labelled with its sessions and the scan baseline')
  const biggest = storage.getByTestId('dsh-prompt-rewind-storage-session')
  fileCheck(await biggest.count() >= 1 && Number(await biggest.first().getAttribute('data-bytes')) > 0, 'the biggest sessions are listed with their size')
  fileCheck(/last activity/.test(await biggest.first().innerText()), 'each with its last activity')
  check(/^Size quota: 4 GiB$/.test(await storage.getByTestId('dsh-prompt-rewind-storage-quota').innerText()), 'the default size quota is shown, enforced with auto-cleanup off')
  const disk = storage.getByTestId('dsh-prompt-rewind-storage-disk')
  check(/^On disk: [\d.]+ (B|KiB|MiB) for [\d.]+ (B|KiB|MiB) of backups \(ratio \d+\.\d\d\)\.$/.test(await disk.innerText()) && Number(await disk.getAttribute('data-disk')) > 0, 'the storage view shows the bytes on disk, the logical bytes and their ratio')
  // The quota is edited in the config card (MiB) and the view follows the saved value.
  const quotaCard = history.getByTestId('dsh-prompt-rewind-config-history')
  const maxSize = quotaCard.getByTestId('dsh-prompt-rewind-max-size')
  check(await maxSize.inputValue() === '4096', 'the config card shows the quota in MiB')
  await maxSize.fill('2048')
  await quotaCard.getByTestId('dsh-prompt-rewind-save').click()
  await quotaCard.getByTestId('dsh-prompt-rewind-save-status').filter({ hasText: 'Saved.' }).waitFor({ timeout: 10000 })
  await storage.getByTestId('dsh-prompt-rewind-storage-quota').filter({ hasText: 'Size quota: 2 GiB' }).waitFor({ timeout: 10000 }).catch(() => {})
  check(/^Size quota: 2 GiB\b/.test(await storage.getByTestId('dsh-prompt-rewind-storage-quota').innerText()), 'a quota saved from the config card shows in the storage view')
  await storage.scrollIntoViewIfNeeded()
  await shot(page, 'rewind-storage')

  // --- the configuration card: one model on the Rewind history page and on the Plugins page
  const card = history.getByTestId('dsh-prompt-rewind-config-history')
  const backups = card.getByTestId('dsh-prompt-rewind-backups')
  await backups.waitFor({ timeout: 10000 })
  const before = await backups.isChecked()
  await backups.click()
  await card.getByTestId('dsh-prompt-rewind-save').click()
  await card.getByTestId('dsh-prompt-rewind-save-status').filter({ hasText: 'Saved.' }).waitFor({ timeout: 10000 })
  check(await backups.isChecked() === !before, 'backups toggled and saved from the Rewind history page')
  await card.scrollIntoViewIfNeeded()
  await shot(page, 'config-card')
  const closeSettings = async () => {
    await page.keyboard.press('Escape')
    await page.getByTestId('dsh-prompt-rewind-history').or(page.getByTestId('dsh-prompt-rewind-config-plugins')).first().waitFor({ state: 'detached', timeout: 5000 })
  }
  await closeSettings()
  // with backups off, the dialog says so
  check(before === true, 'backups were on before the toggle')
  dialog = await openRewindDialog(page, M1)
  await dialog.getByTestId('dsh-prompt-rewind-impact').or(dialog.getByTestId('dsh-prompt-rewind-impact-error')).waitFor({ timeout: 10000 })
  check(await dialog.getByTestId('dsh-prompt-rewind-backup-off').count() === 1, 'with backups off the dialog states it')
  await shot(page, 'dialog-backups-off')
  await page.keyboard.press('Escape')
  await dialog.waitFor({ state: 'detached', timeout: 5000 })
  await page.getByText('Settings', { exact: true }).last().click()
  await page.getByText('Plugins', { exact: true }).first().click()
  await page.getByText('Prompt rewind', { exact: true }).first().click()
  const pluginCard = page.getByTestId('dsh-prompt-rewind-config-plugins')
  await pluginCard.waitFor({ timeout: 10000 })
  check(await pluginCard.getByTestId('dsh-prompt-rewind-backups').isChecked() === !before, 'the Plugins page card shows the same settings model')
  await shot(page, 'plugins-page-card')
  await page.getByText('Plugin configuration', { exact: true }).first().click()
  const itemCard = page.getByTestId('dsh-prompt-rewind-config-plugins-item')
  await itemCard.waitFor({ timeout: 10000 })
  check(await itemCard.getByTestId('dsh-prompt-rewind-backups').isChecked() === !before, 'DSH\'s own "Plugin configuration" tab shows the card over the same model')
  await page.getByText('Prompt rewind', { exact: true }).first().click()
  await pluginCard.waitFor({ timeout: 10000 })
  await pluginCard.getByTestId('dsh-prompt-rewind-backups').click()
  await pluginCard.getByTestId('dsh-prompt-rewind-save').click()
  await pluginCard.getByTestId('dsh-prompt-rewind-save-status').filter({ hasText: 'Saved.' }).waitFor({ timeout: 10000 })
  check(await pluginCard.getByTestId('dsh-prompt-rewind-backups').isChecked() === before, 'backups restored from the Plugins page')
  await closeSettings()

  // --- /rewind picker: ↑ ↓ Enter Esc; a rewind of a rewind
  await composer.fill('')
  await send(page, composer, M4, 'DONE: d.txt')
  check(read('d.txt') === 'delta-4\n', 'turn 4 created d.txt')
  const openPicker = async () => {
    await composer.fill('/rewind')
    await page.waitForTimeout(200)
    await composer.press('Enter')
    const box = page.getByRole('listbox').filter({ has: page.getByRole('option') })
    await box.first().waitFor({ timeout: 10000 })
    return box.first()
  }
  let box = await openPicker()
  const options = await box.getByRole('option').allInnerTexts()
  log('picker rows:', JSON.stringify(options))
  check(options.length >= 2 && options[0].includes(M4) && options.some(o => o.includes(M1)), 'the picker lists the messages still on screen, newest first')
  check(!options.some(o => o.includes(M2) || o.includes(M3)), 'rewound messages are not offered')
  await page.keyboard.press('ArrowDown')
  const selected = await box.locator('[aria-selected="true"]').innerText()
  check(selected.includes(M1), 'ArrowDown moves to the next row')
  await page.keyboard.press('ArrowUp')
  check((await box.locator('[aria-selected="true"]').innerText()).includes(M4), 'ArrowUp moves back')
  await shot(page, 'rewind-picker')
  await page.keyboard.press('Escape')
  await box.waitFor({ state: 'detached', timeout: 5000 })
  check(await page.getByTestId('dsh-prompt-rewind-dialog').count() === 0 && read('d.txt') === 'delta-4\n', 'Esc closes the picker without a rewind')
  await composer.fill('/undo')
  await page.waitForTimeout(200)
  await composer.press('Enter')
  const undoBox = page.getByRole('listbox').filter({ has: page.getByRole('option') }).first()
  await undoBox.waitFor({ timeout: 10000 })
  check((await undoBox.getByRole('option').allInnerTexts()).length === options.length, '/undo opens the same picker')
  await page.keyboard.press('Escape')
  await undoBox.waitFor({ state: 'detached', timeout: 5000 })
  await composer.fill('')
  box = await openPicker()
  await page.keyboard.press('Enter')
  await page.waitForFunction(() => (window.__dshPromptRewind?.events ?? []).some(e => e.type === 'rewind' && e.via === '/rewind'), null, { timeout: 20000 })
  const viaPicker = (await probe(page)).events.filter(e => e.via === '/rewind').at(-1)
  check(viaPicker.ok === true && viaPicker.refill === 'filled', `Enter picked the newest message and rewound (${viaPicker.refill})`)
  await page.waitForFunction(() => (window.__dshPromptRewind?.markers ?? []).length >= 2, null, { timeout: 10000 })
  await page.waitForTimeout(300)
  const usersAfter = await visibleUserRows(page)
  check(usersAfter.length === 1 && usersAfter[0].includes(M1), `a rewind of a rewind leaves the first message only (${JSON.stringify(usersAfter)})`)
  check(await composer.inputValue() === M4, 'the composer holds the picked message')
  fileCheck(read('d.txt') === null, 'd.txt deleted by the second rewind')
  await shot(page, 'after-picker-rewind')

  // --- a file edited after the rewind: the undo asks, per file, to keep it or take the old version
  fs.writeFileSync(path.join(ws, 'd.txt'), 'edited by the user\n')
  await page.getByText('Settings', { exact: true }).last().click()
  await page.getByText('Rewind history', { exact: true }).first().click()
  const history2 = page.getByTestId('dsh-prompt-rewind-history')
  const undo2 = history2.getByTestId('dsh-prompt-rewind-undo').first()
  await undo2.waitFor({ timeout: 10000 })
  await undo2.click()
  const refusal = history2.getByTestId('dsh-prompt-rewind-notice')
  await refusal.waitFor({ timeout: 10000 })
  const refusalText = await refusal.innerText()
  log('stale undo notice:', JSON.stringify(refusalText))
  const choices = history2.getByTestId('dsh-prompt-rewind-undo-choices')
  check(/changed after the rewind/.test(refusalText) && await choices.count() === 1 && await choices.getByTestId('dsh-prompt-rewind-undo-choice').getAttribute('data-path') === 'd.txt', 'the undo lists the file edited since and asks what to do with it')
  check(await choices.getByTestId('dsh-prompt-rewind-undo-keep').isChecked(), '"keep as it is" is the default choice')
  check(read('d.txt') === 'edited by the user\n', 'nothing changed while the choice is open')
  await shot(page, 'stale-undo')
  await choices.getByRole('button', { name: 'Cancel' }).click()
  await choices.waitFor({ state: 'detached', timeout: 5000 })
  await page.keyboard.press('Escape')
  await history2.waitFor({ state: 'detached', timeout: 5000 })
  fs.rmSync(path.join(ws, 'd.txt'))

  // --- a non-empty draft is never overwritten
  await composer.fill('my own draft')
  dialog = await openRewindDialog(page, M1)
  await dialog.getByTestId('dsh-prompt-rewind-impact').or(dialog.getByTestId('dsh-prompt-rewind-impact-error')).waitFor({ timeout: 10000 })
  await dialog.getByTestId('dsh-prompt-rewind-confirm').click()
  await dialog.waitFor({ state: 'detached', timeout: 20000 })
  const third = (await probe(page)).events.filter(e => e.type === 'rewind').at(-1)
  check(third.ok === true && third.refill === 'kept-draft', `the draft was kept (${third.refill})`)
  check(await composer.inputValue() === 'my own draft', 'the composer still holds the user\'s draft')
  await page.waitForTimeout(300)
  check((await visibleUserRows(page)).length === 0, 'rewinding to the first message empties the transcript')
  check(page.pageErrors.length === 0, 'no page errors')

  // --- a change the backups could not cover is stated in the dialog
  const sid = (await probe(page)).events.find(e => e.sessionId)?.sessionId
  const setCap = (bytes) => page.evaluate(async ([sessionId, maxFileBytes]) => {
    const r = await fetch('/dsh-rewind/api/settings.update', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ sessionId, patch: { maxFileBytes } }) })
    return r.json()
  }, [sid, bytes])
  await composer.fill('')
  await send(page, composer, 'write big.txt 0123456789', 'DONE: big.txt')
  const capped = await setCap(4)
  check(capped.ok === true && capped.value.maxFileBytes === 4, 'per-file backup cap set to 4 bytes through the RPC')
  await send(page, composer, 'write big.txt 9876543210', 'DONE: big.txt')
  dialog = await openRewindDialog(page, 'write big.txt 9876543210')
  await dialog.getByTestId('dsh-prompt-rewind-impact').waitFor({ timeout: 10000 })
  log('dialog text (over the cap):', JSON.stringify(await dialog.innerText()))
  check(await dialog.getByTestId('dsh-prompt-rewind-uncovered').count() === 1 && (await dialog.getByTestId('dsh-prompt-rewind-uncovered').innerText()).includes('big.txt'),
    'a file over the backup cap is listed as not covered')
  await shot(page, 'dialog-uncovered')
  await page.keyboard.press('Escape')
  await dialog.waitFor({ state: 'detached', timeout: 5000 })
  check((await setCap(8 * 1024 * 1024)).ok === true, 'cap restored')

  // --- a typed `/rewind @<seq>` runs directly (the host command); the client hides the span and refills
  const cands = await page.evaluate(async (sessionId) => {
    const r = await fetch('/dsh-rewind/api/candidates', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ sessionId }) })
    return r.json()
  }, sid)
  const bigSeq = cands.value.candidates.find(c => c.preview.includes('9876543210'))?.seq
  check(Number.isInteger(bigSeq), `candidates RPC names the newest message (@${bigSeq})`)
  await composer.fill(`/rewind @${bigSeq}`)
  await page.waitForTimeout(200)
  await composer.press('Enter')
  await page.waitForFunction(() => (window.__dshPromptRewind?.events ?? []).some(e => e.type === 'rewind-observed'), null, { timeout: 20000 })
  const observed = (await probe(page)).events.filter(e => e.type === 'rewind-observed').at(-1)
  log('observed:', JSON.stringify(observed))
  await page.waitForTimeout(300)
  check(observed.seq === bigSeq && observed.refill === 'filled', `/rewind @<seq> ran without a picker and the composer was refilled (${observed.refill})`)
  check(await composer.inputValue() === 'write big.txt 9876543210', 'the composer holds the rewound message')
  const usersTyped = await visibleUserRows(page)
  check(usersTyped.length === 1 && usersTyped[0].includes('0123456789'), `the typed rewind hid its span (${JSON.stringify(usersTyped)})`)
  check(read('big.txt') === '9876543210\n', 'the file not covered by a backup is left as it is')
  await shot(page, 'after-typed-rewind')
  await composer.fill('')

  // --- a reload rebuilds the same view from the log, and refills nothing
  await page.reload()
  await page.locator('textarea[data-phase]').waitFor({ timeout: 20000 })
  await userRow(page, '0123456789').first().waitFor({ timeout: 20000 })
  await page.waitForFunction(() => (window.__dshPromptRewind?.hidden ?? []).length > 0, null, { timeout: 10000 })
  await page.waitForTimeout(500)
  const usersReload = await visibleUserRows(page)
  check(usersReload.length === 1 && usersReload[0].includes('0123456789'), `after a reload the rewound rows stay hidden (${JSON.stringify(usersReload)})`)
  check(await page.locator('textarea[data-phase]').inputValue() === '', 'a reload refills nothing')
  check((await probe(page)).markers.length >= 4, 'every marker of the session is applied after the reload')

  // --- "Fork" in the dialog: the child session opens with the composer refilled; the original stays listed
  const FORK_MSG = 'write f.txt fork-1'
  await send(page, composer, FORK_MSG, 'DONE: f.txt')
  check(read('f.txt') === 'fork-1\n', 'f.txt written before the fork')
  const sessionRows = page.locator('[role="treeitem"][aria-selected]')
  const rowsBeforeFork = await sessionRows.count()
  dialog = await openRewindDialog(page, FORK_MSG)
  await dialog.getByTestId('dsh-prompt-rewind-impact').waitFor({ timeout: 10000 })
  fileCheck((await dialog.getByTestId('dsh-prompt-rewind-deletes').innerText()).includes('f.txt'), 'the impact list is the same for Fork: f.txt will be deleted')
  check(await dialog.getByTestId('dsh-prompt-rewind-fork').isVisible() && await dialog.getByTestId('dsh-prompt-rewind-confirm').isVisible(), 'Fork is offered next to Rewind')
  await shot(page, 'dialog-fork')
  await dialog.getByTestId('dsh-prompt-rewind-fork').click()
  await dialog.waitFor({ state: 'detached', timeout: 30000 })
  const forked = (await probe(page)).events.filter(e => e.type === 'fork').at(-1)
  log('fork:', JSON.stringify(forked))
  check(forked?.ok === true && forked.opened === true && forked.refill === 'filled' && forked.childSessionId !== sid, `the fork ran and opened its child session (${forked?.childSessionId})`)
  await page.waitForFunction((text) => document.querySelector('textarea[data-phase]')?.value === text, FORK_MSG, { timeout: 10000 })
  check(await page.locator('textarea[data-phase]').inputValue() === FORK_MSG, 'the child\'s composer holds the target\'s text')
  await page.waitForTimeout(300)
  const childRows = await visibleUserRows(page)
  check(!childRows.some(r => r.includes(FORK_MSG)) && childRows.some(r => r.includes('0123456789')), `the child shows the messages before the target only (${JSON.stringify(childRows)})`)
  fileCheck(read('f.txt') === null, 'f.txt is back to its state before the target')
  await sessionRows.nth(rowsBeforeFork).waitFor({ timeout: 10000 })
  check(await sessionRows.count() === rowsBeforeFork + 1, `the session list has the child and still the original (${await sessionRows.count()} rows)`)
  await shot(page, 'after-fork')
  // back to the original: its conversation is complete
  const otherCount = await page.locator('[role="treeitem"][aria-selected="false"]').count()
  let original = false
  for (let i = 0; i < otherCount && !original; i++) {
    await page.locator('[role="treeitem"][aria-selected="false"]').nth(i).click()
    original = await userRow(page, FORK_MSG).first().waitFor({ timeout: 5000 }).then(() => true, () => false)
  }
  check(original, 'the original session is still listed and still holds the forked-from message')
  await page.locator('textarea[data-phase]').fill('')

  // --- the target's image comes back with its text
  // paste a PNG into the composer (the way a user attaches a screenshot)
  await composer.focus()
  await page.evaluate(async () => {
    const bytes = Uint8Array.from(atob('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=='), c => c.charCodeAt(0))
    const dt = new DataTransfer()
    dt.items.add(new File([bytes], 'pixel.png', { type: 'image/png' }))
    document.querySelector('textarea[data-phase]').dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true }))
  })
  await page.locator('[data-composer-card] img').first().waitFor({ timeout: 10000 })
  await send(page, composer, 'write img.txt picture', 'DONE: img.txt')
  check(await page.locator('[data-composer-card] img').count() === 0, 'the image was sent with the message')
  await shot(page, 'image-message')
  dialog = await openRewindDialog(page, 'write img.txt picture')
  await dialog.getByTestId('dsh-prompt-rewind-impact').waitFor({ timeout: 10000 })
  await page.keyboard.press('Meta+Enter')   // ⌘+Enter confirms too
  await dialog.waitFor({ state: 'detached', timeout: 20000 })
  const withImage = (await probe(page)).events.filter(e => e.type === 'rewind').at(-1)
  log('image rewind:', JSON.stringify({ refill: withImage.refill, images: withImage.images }))
  check(withImage.ok === true && withImage.refill === 'filled' && withImage.images === 1, 'the rewound message\'s image is re-attached')
  check(await composer.inputValue() === 'write img.txt picture' && await page.locator('[data-composer-card] img').count() === 1, 'the composer holds the text and the image again')
  check(read('img.txt') === null, 'img.txt removed by the rewind')
  await shot(page, 'image-refilled')

  // --- every change comes back: files changed by DSH's real `bash` tool
  await send(page, composer, 'write sh.txt one', 'DONE: sh.txt')
  const SHELL_MSG = 'bash sed -i s/one/two/ sh.txt; bash mkdir -p gen/sub && echo g > gen/sub/g.txt; bash chmod +x sh.txt'
  await send(page, composer, SHELL_MSG, 'DONE: bash, bash, bash')
  fileCheck(read('sh.txt') === 'two\n' && read('gen/sub/g.txt') === 'g\n', 'the shell changed sh.txt and generated gen/sub/g.txt')
  dialog = await openRewindDialog(page, SHELL_MSG)
  await dialog.getByTestId('dsh-prompt-rewind-impact').waitFor({ timeout: 10000 })
  const shellImpact = await dialog.getByTestId('dsh-prompt-rewind-impact').innerText()
  log('dialog text (shell):', JSON.stringify(shellImpact))
  fileCheck(shellImpact.includes('sh.txt') && shellImpact.includes('gen/sub/g.txt'), 'the dialog lists the files the shell changed')
  await shot(page, 'dialog-shell')
  await dialog.getByTestId('dsh-prompt-rewind-confirm').click()
  await dialog.waitFor({ state: 'detached', timeout: 20000 })
  fileCheck(read('sh.txt') === 'one\n' && (fs.statSync(path.join(ws, 'sh.txt')).mode & 0o111) === 0, 'sh.txt is back (bytes and no executable bit)')
  fileCheck(!fs.existsSync(path.join(ws, 'gen')), 'the generated directory tree is gone')
  await composer.fill('')

  // --- see before you rewind: a diff per file, a binary summarized, a file unticked, a hand edit marked
  const SETUP_MSG = "bash printf 'l1\\nl2\\nl3\\n' > d1.txt && printf 'keep\\n' > d2.txt && printf 'x\\000y' > d3.bin && printf 'h\\n' > h.txt"
  await send(page, composer, SETUP_MSG, 'DONE: bash')
  check(await untilAnswered(SETUP_MSG) && read('h.txt') === 'h\n', 'the shell created d1.txt, d2.txt, d3.bin and h.txt')
  await page.waitForTimeout(500)
  const PICK_MSG = "bash sed -i s/l2/L2-agent/ d1.txt && echo more >> d2.txt && printf 'A\\000B\\000C' > d3.bin && echo agent > h.txt"
  await send(page, composer, PICK_MSG, 'DONE: bash')
  check(await untilAnswered(PICK_MSG), 'the target turn ran its shell command')
  await page.waitForTimeout(500)
  fileCheck(read('d1.txt') === 'l1\nL2-agent\nl3\n' && read('d2.txt') === 'keep\nmore\n' && read('h.txt') === 'agent\n', 'the agent\'s shell changed d1.txt, d2.txt, d3.bin and h.txt')
  fs.writeFileSync(path.join(ws, 'h.txt'), 'by hand\n')
  await send(page, composer, 'just talk', 'ECHO: just talk')
  dialog = await openRewindDialog(page, PICK_MSG)
  await dialog.getByTestId('dsh-prompt-rewind-impact').waitFor({ timeout: 10000 })
  const row = (p) => dialog.locator(`[data-testid="dsh-prompt-rewind-file"][data-path="${p}"]`)
  await row('d1.txt').waitFor({ timeout: 10000 })
  log('dialog text (choice):', JSON.stringify(await dialog.getByTestId('dsh-prompt-rewind-impact').innerText()))
  fileCheck(await row('d1.txt').getByTestId('dsh-prompt-rewind-file-counts').innerText() === '+1 −1', 'd1.txt shows +1 −1')
  fileCheck(await row('d2.txt').getByTestId('dsh-prompt-rewind-file-counts').innerText() === '+0 −1', 'd2.txt shows +0 −1')
  fileCheck(await row('d3.bin').getByTestId('dsh-prompt-rewind-file-counts').count() === 0, 'the binary file has no line counts')
  fileCheck(await row('h.txt').getAttribute('data-origin') === 'outside' && /changed outside this agent/.test(await row('h.txt').getByTestId('dsh-prompt-rewind-file-origin').innerText()), 'the file edited by hand between turns is marked as changed outside this agent')
  fileCheck(await row('d1.txt').getByTestId('dsh-prompt-rewind-file-origin').count() === 0, 'the agent\'s own change carries no mark')
  const chosen = async () => dialog.getByTestId('dsh-prompt-rewind-chosen').getAttribute('data-chosen')
  fileCheck(await chosen() === '4' && /4 of 4 files will be restored/.test(await dialog.getByTestId('dsh-prompt-rewind-chosen').innerText()), 'every file is checked at first')
  // the diff of a text file, opened with the keyboard and read
  await row('d1.txt').getByTestId('dsh-prompt-rewind-file-diff-toggle').focus()
  await page.keyboard.press('Enter')
  const diffText = await row('d1.txt').getByTestId('dsh-prompt-rewind-diff').innerText({ timeout: 10000 })
  log('d1.txt diff:', JSON.stringify(diffText))
  fileCheck(/^@@ .* @@$/m.test(diffText) && /^-L2-agent$/m.test(diffText) && /^\+l2$/m.test(diffText) && /^ l1$/m.test(diffText), 'the diff shows the line the rewind takes back, with context')
  fileCheck(await row('d1.txt').getByTestId('dsh-prompt-rewind-file-diff-toggle').getAttribute('aria-expanded') === 'true', 'the toggle says the diff is open')
  await shot(page, 'dialog-diff')
  await row('d3.bin').getByTestId('dsh-prompt-rewind-file-diff-toggle').click()
  const binText = await row('d3.bin').getByTestId('dsh-prompt-rewind-diff-summary').innerText({ timeout: 10000 })
  log('d3.bin summary:', JSON.stringify(binText))
  fileCheck(/Now: binary, 5 B · sha256 [0-9a-f]{12}/.test(binText) && /After the rewind: binary, 3 B · sha256 [0-9a-f]{12}/.test(binText), 'the binary file is summarized with sizes and hashes')
  // a file's name opens its diff as the Diff button does (and closes it again)
  await row('h.txt').getByTestId('dsh-prompt-rewind-file-name').click()
  await row('h.txt').getByTestId('dsh-prompt-rewind-diff').or(row('h.txt').getByTestId('dsh-prompt-rewind-diff-summary')).waitFor({ timeout: 10000 })
  fileCheck(await row('h.txt').getByTestId('dsh-prompt-rewind-file-diff-toggle').getAttribute('aria-expanded') === 'true' && await row('h.txt').getByTestId('dsh-prompt-rewind-file-check').isChecked(), 'clicking a file\'s name opens its diff and leaves its checkbox alone')
  await row('h.txt').getByTestId('dsh-prompt-rewind-file-name').click()
  fileCheck(await row('h.txt').getByTestId('dsh-prompt-rewind-diff').count() === 0 && await row('h.txt').getByTestId('dsh-prompt-rewind-diff-summary').count() === 0, 'a second click closes it')
  // untick d2.txt; then keep every change not made by this agent
  await row('d2.txt').getByTestId('dsh-prompt-rewind-file-check').uncheck()
  fileCheck(await chosen() === '3' && await row('d2.txt').getByTestId('dsh-prompt-rewind-file-kept').count() === 1, 'an unticked file is marked as kept')
  await dialog.getByTestId('dsh-prompt-rewind-keep-outside').click()
  fileCheck(await chosen() === '2' && !(await row('h.txt').getByTestId('dsh-prompt-rewind-file-check').isChecked()), '"Keep changes not made by this agent" unticks the hand-edited file')
  await shot(page, 'dialog-choose-files')
  await dialog.getByTestId('dsh-prompt-rewind-confirm').click()
  await dialog.waitFor({ state: 'detached', timeout: 20000 })
  const picked = (await probe(page)).events.filter(e => e.type === 'rewind').at(-1)
  check(picked.ok === true && JSON.stringify([...picked.kept].sort()) === '["d2.txt","h.txt"]', `the rewind ran with two files kept (${JSON.stringify(picked.kept)})`)
  fileCheck(read('d1.txt') === 'l1\nl2\nl3\n' && fs.readFileSync(path.join(ws, 'd3.bin')).equals(Buffer.from('x\0y')), 'the checked files are restored')
  fileCheck(read('d2.txt') === 'keep\nmore\n' && read('h.txt') === 'by hand\n', 'the unticked files are left as they were')
  await page.getByText('Settings', { exact: true }).last().click()
  await page.getByText('Rewind history', { exact: true }).first().click()
  const history3 = page.getByTestId('dsh-prompt-rewind-history')
  const pickedEntry = history3.getByTestId('dsh-prompt-rewind-entry').first()
  await pickedEntry.waitFor({ timeout: 10000 })
  const targetShown = await pickedEntry.getByTestId('dsh-prompt-rewind-entry-target').innerText()
  check(targetShown.includes('sed -i s/l2/L2-agent/'), `the history entry shows the target message's text (${JSON.stringify(targetShown.slice(0, 60))})`)
  fileCheck(/2 kept/.test(await pickedEntry.getByTestId('dsh-prompt-rewind-entry-kept').innerText()), 'the entry counts the kept files')
  await pickedEntry.getByTestId('dsh-prompt-rewind-entry-paths').locator('summary').click()
  fileCheck(/Kept as they were \(2\)\s+d2\.txt\s+h\.txt/.test(await pickedEntry.getByTestId('dsh-prompt-rewind-entry-paths').innerText()), 'the entry lists the kept files')
  check(/^Workspace: \S+$/.test(await history3.getByTestId('dsh-prompt-rewind-workspace').innerText()) && !(await history3.getByTestId('dsh-prompt-rewind-workspace').innerText()).includes('ws-'), 'the history names the workspace by its folder')
  await shot(page, 'history-kept')
  await page.keyboard.press('Escape')
  await history3.waitFor({ state: 'detached', timeout: 5000 })
  // the typed path: /rewind @<seq> --only d1.txt
  await composer.fill('')
  const AGAIN_MSG = 'bash echo again >> d1.txt && echo again >> d2.txt'
  await send(page, composer, AGAIN_MSG, 'DONE: bash')
  check(await untilAnswered(AGAIN_MSG) && read('d2.txt') === 'keep\nmore\nagain\n', 'the shell appended to d1.txt and d2.txt')
  await page.waitForTimeout(500)
  const againSeq = (await page.evaluate(async (sessionId) => {
    const r = await fetch('/dsh-rewind/api/candidates', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ sessionId }) })
    return r.json()
  }, sid)).value.candidates.find(c => c.preview.includes('echo again'))?.seq
  check(Number.isInteger(againSeq), `the typed target is known (@${againSeq})`)
  await composer.fill(`/rewind @${againSeq} --only d1.txt`)
  await page.waitForTimeout(200)
  await composer.press('Enter')
  await page.waitForFunction((seq) => (window.__dshPromptRewind?.events ?? []).some(e => e.type === 'rewind-observed' && e.seq === seq), againSeq, { timeout: 20000 })
  fileCheck(read('d1.txt') === 'l1\nl2\nl3\n' && read('d2.txt') === 'keep\nmore\nagain\n', 'the typed --only restored d1.txt and left d2.txt')
  await composer.fill('')

  // --- a rewind that cannot restore a file: the banner says so, and Continue finishes it once the
  // cause is gone (the file made immutable: `chattr +i` stops even root)
  const LOCK_MSG = 'write lock.txt locked'
  await send(page, composer, LOCK_MSG, 'DONE: lock.txt')
  const lockPath = path.join(ws, 'lock.txt')
  if (spawnSync('chattr', ['+i', lockPath]).status !== 0) log('SKIPPED: chattr +i is not available here (a rewind that cannot restore a file)')
  else {
    try {
      dialog = await openRewindDialog(page, LOCK_MSG)
      await dialog.getByTestId('dsh-prompt-rewind-impact').waitFor({ timeout: 10000 })
      await dialog.getByTestId('dsh-prompt-rewind-confirm').click()
      await dialog.waitFor({ state: 'detached', timeout: 20000 })
      const partial = page.getByTestId('dsh-prompt-rewind-interrupted')
      await partial.waitFor({ timeout: 15000 })
      const partialText = await partial.innerText()
      log('banner (partial):', JSON.stringify(partialText))
      fileCheck(/A rewind could not restore every file\./.test(partialText) && /Rewind to “write lock\.txt locked” — 1 of 1 file changes could not be applied/.test(partialText), 'the banner says the rewind could not restore a file, naming its message')
      fileCheck(read('lock.txt') === 'locked\n', 'the file the system refused to delete is still there')
      await shot(page, 'partial-banner')
      spawnSync('chattr', ['-i', lockPath])
      await partial.getByTestId('dsh-prompt-rewind-interrupted-continue').click()
      const partialNotice = partial.getByTestId('dsh-prompt-rewind-interrupted-notice')
      await partialNotice.waitFor({ timeout: 20000 })
      log('notice (partial):', JSON.stringify(await partialNotice.innerText()))
      fileCheck(/^Finished the rewind to “write lock\.txt locked”: 0 written, 1 deleted\.$/.test(await partialNotice.innerText()), 'Continue finished the rewind')
      fileCheck(read('lock.txt') === null, 'the file is deleted now')
      check(await partial.getByTestId('dsh-prompt-rewind-interrupted-continue').count() === 0, 'the banner offers nothing more')
      await partial.getByTestId('dsh-prompt-rewind-interrupted-dismiss').click()
      await partial.waitFor({ state: 'detached', timeout: 5000 })
    } finally {
      spawnSync('chattr', ['-i', lockPath])
    }
  }
  await composer.fill('')

  // --- languages: a Japanese browser (DSH itself has zh/en only; the plugin follows the browser)
  const jaRun = await launch('ja-JP')
  try {
    const jp = jaRun.page
    await jp.goto(baseUrl)
    await dismissModals(jp)
    await jp.getByText('Rewind e2e session').first().click({ timeout: 20000 })
    await jp.locator('textarea[data-phase]').waitFor()
    await jp.waitForFunction(() => window.__dshPromptRewind?.locale !== undefined)
    check((await probe(jp)).locale === 'ja', 'a Japanese browser gets the Japanese copy')
    await jp.getByText('Settings', { exact: true }).or(jp.getByText('设置', { exact: true })).last().click()
    await jp.getByText('巻き戻し履歴', { exact: true }).first().click()
    const jaHistory = jp.getByTestId('dsh-prompt-rewind-history')
    await jaHistory.getByTestId('dsh-prompt-rewind-entry').first().waitFor({ timeout: 10000 })
    const jaOutcome = await jaHistory.getByTestId('dsh-prompt-rewind-outcome').first().innerText()
    check(['完了', '一部', '失敗'].includes(jaOutcome) && await jaHistory.getByText('巻き戻しの設定').count() === 1, `Settings → 巻き戻し履歴 renders in Japanese (${jaOutcome})`)
    await shot(jp, 'ja-history')
  } finally {
    await jaRun.context.close()
  }

  // --- switch DSH's interface language to 中文: the plugin follows
  await page.getByText('Settings', { exact: true }).last().click()
  await page.getByText('General', { exact: true }).first().click()
  const langButton = page.locator('button[aria-haspopup="menu"]').filter({ hasText: /English|中文/ }).first()
  await langButton.click()
  await page.getByRole('menuitem', { name: '中文' }).or(page.getByRole('menuitemradio', { name: '中文' })).first().click()
  await page.getByText('回退历史', { exact: true }).first().waitFor({ timeout: 10000 })
  check((await probe(page)).locale === 'zh-CN', 'switching DSH to 中文 switches the plugin to zh-CN')
  await page.getByText('回退历史', { exact: true }).first().click()
  await page.getByTestId('dsh-prompt-rewind-history').getByText('回退设置').waitFor({ timeout: 10000 })
  await shot(page, 'zh-history')
  const zhHistory = page.getByTestId('dsh-prompt-rewind-history')
  const wsState = () => JSON.stringify(fs.readdirSync(ws).sort().map(f => [f, fs.statSync(path.join(ws, f)).isFile() ? read(f) : 'dir']))
  const wsBefore = wsState()
  await zhHistory.getByTestId('dsh-prompt-rewind-clear').click()
  await zhHistory.getByTestId('dsh-prompt-rewind-clear-yes').click()
  await zhHistory.getByTestId('dsh-prompt-rewind-empty').waitFor({ timeout: 10000 })
  check(/已清空 \d+ 条记录/.test(await zhHistory.getByTestId('dsh-prompt-rewind-notice').innerText()) && (await zhHistory.getByTestId('dsh-prompt-rewind-empty').innerText()) === '此工作区还没有回退记录。',
    'clear history empties the list (zh-CN copy)')
  check(wsState() === wsBefore, 'clearing the history touches no workspace file')
  await page.keyboard.press('Escape')
  await page.waitForTimeout(300)
  await page.locator('[data-testid="dsh-prompt-rewind-button"]').count()
  check(page.pageErrors.length === 0, 'no page errors')
  }
} catch (e) {
  failed = e
  console.error('E2E FAILED:', e.stack ?? e.message)
  try { await page.screenshot({ path: path.join(shots, `${MODE}-failure.png`) }); fs.writeFileSync(path.join(shots, `${MODE}-failure.html`), await page.content()) } catch {}
} finally {
  await main.context.close()
  for (const dir of profiles) fs.rmSync(dir, { recursive: true, force: true })
}
log(`${checks} checks passed${failed ? ', then a failure' : ''}${skippedFileChecks ? `; ${skippedFileChecks} file checks SKIPPED (no snapshot store)` : ''}`)
process.exit(failed ? 1 : skippedFileChecks > 0 ? 3 : 0)
