#!/usr/bin/env node
/**
 * The layout rules of the host plugin's TypeScript (js/src) and what it shares with the client
 * (shared/): no import cycle among its modules (type-only imports count too: a module that needs
 * another's types is not below it), and no module over MAX_LINES lines — a concern that grows
 * past it is split (see docs/architecture.md, "The host plugin by concern").
 *
 *   node scripts/check-js-layout.mjs            check js/src and shared/
 *   node scripts/check-js-layout.mjs <dir>...   check these directories instead
 *
 * Exits 1, naming every cycle and every long file, when a rule is broken.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

/** Longest module allowed, in lines. */
export const MAX_LINES = 400

const root = dirname(dirname(fileURLToPath(import.meta.url)))

/** Every `.ts` file under `dir`. */
function tsFiles(dir) {
  const out = []
  for (const name of readdirSync(dir)) {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) out.push(...tsFiles(path))
    else if (/\.tsx?$/.test(name) && !name.endsWith('.d.ts')) out.push(path)
  }
  return out
}

/** The relative modules `text` imports or re-exports (`import … from`, `export … from`, `import('…')`, bare `import '…'`). */
export function importsOf(text) {
  const specs = new Set()
  const patterns = [
    /^\s*(?:import|export)\s[^'"]*?\sfrom\s*['"]([^'"]+)['"]/gm,
    /^\s*import\s*['"]([^'"]+)['"]/gm,
    /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g,
  ]
  for (const re of patterns) for (const m of text.matchAll(re)) if (m[1].startsWith('.')) specs.add(m[1])
  return [...specs]
}

/** The cycles of a graph (Map file → files), each as its strongly connected set of files. */
export function cyclesOf(graph) {
  let index = 0
  const idx = new Map()
  const low = new Map()
  const stack = []
  const on = new Set()
  const out = []
  const visit = (v) => {
    idx.set(v, index)
    low.set(v, index++)
    stack.push(v)
    on.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue
      if (!idx.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v), low.get(w)))
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)))
    }
    if (low.get(v) === idx.get(v)) {
      const scc = []
      let w
      do {
        w = stack.pop()
        on.delete(w)
        scc.push(w)
      } while (w !== v)
      if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) out.push(scc.sort())
    }
  }
  for (const v of graph.keys()) if (!idx.has(v)) visit(v)
  return out
}

/** The broken rules of the modules under `dirs`, as lines of text (none: the layout holds). */
export function check(dirs) {
  const files = dirs.flatMap(d => tsFiles(d))
  const graph = new Map()
  const problems = []
  for (const file of files) {
    const text = readFileSync(file, 'utf8')
    const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0)
    if (lines > MAX_LINES) problems.push(`${relative(root, file)}: ${lines} lines (at most ${MAX_LINES}: split it by concern)`)
    graph.set(file, importsOf(text).map(spec => resolve(dirname(file), spec)))
  }
  for (const cycle of cyclesOf(graph)) {
    problems.push(`import cycle: ${cycle.map(f => relative(root, f)).join(' ↔ ')}`)
  }
  return problems
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2)
  const dirs = (args.length > 0 ? args : ['js/src', 'shared']).map(d => resolve(root, d))
  const problems = check(dirs)
  if (problems.length > 0) {
    for (const p of problems) process.stderr.write(`check-js-layout: ${p}\n`)
    process.exit(1)
  }
  process.stderr.write(`check-js-layout: ${dirs.map(d => relative(root, d)).join(', ')}: no import cycle, no module over ${MAX_LINES} lines\n`)
}
