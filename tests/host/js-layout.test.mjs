/**
 * The host plugin's module layout (scripts/check-js-layout.mjs): no import cycle in js/src or
 * shared/, no module over the line limit; and the check itself finds a cycle and a long file.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { MAX_LINES, check } from '../../scripts/check-js-layout.mjs'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..')

test('js/src and shared/ have no import cycle and no module over the line limit', () => {
  assert.deepEqual(check([join(ROOT, 'js', 'src'), join(ROOT, 'shared')]), [])
})

test('the layout check names an import cycle (type-only imports too) and a long module', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'js-layout-'))
  t.after(() => rm(dir, { recursive: true, force: true }))
  await writeFile(join(dir, 'a.ts'), "import { b } from './b.ts'\nexport const a = b\n")
  await writeFile(join(dir, 'b.ts'), "import type { C } from './c.ts'\nexport const b: C = 1\n")
  await writeFile(join(dir, 'c.ts'), "export type { A } from './a.ts'\nexport type C = number\n")
  await writeFile(join(dir, 'd.ts'), `${'// line\n'.repeat(MAX_LINES + 1)}`)
  await writeFile(join(dir, 'e.ts'), "import { a } from './a.ts'\nexport const e = a\n")
  const problems = check([dir])
  assert.equal(problems.length, 2, problems.join('\n'))
  assert.match(problems.find(p => p.startsWith('import cycle')) ?? '', /a\.ts ↔ .*b\.ts ↔ .*c\.ts$/)
  assert.match(problems.find(p => p.includes('d.ts')) ?? '', new RegExp(`${MAX_LINES + 1} lines`))
})
