#!/usr/bin/env node
/**
 * The 5,000-file turn's overhead over several runs of `benches/big-turn.mjs` taken together: one
 * run's interval covers the rounds' spread within that run, not the machine's drift between runs
 * (two runs of one build, back to back, have given 4.5 % and 8.7 %). This reads the rounds each run
 * kept (its `big-turn.json`) and gives, for every run and for all of them pooled, the median and
 * mean of the rounds' pairs with their 95 % intervals (a bootstrap over the host pairs, as the bench
 * does), and the CPU each run's plugin host took more.
 *
 * `node benches/big-turn-pool.mjs [run.json ...]`; with no argument, the runs kept in
 * `benches/results/big-turn-*.json`. Writes target/bench-results/big-turn-pool.md.
 */
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { bootstrap, mean, median } from './support/stats.mjs'

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)))
const KEPT = join(ROOT, 'benches', 'results')

let paths = process.argv.slice(2)
if (paths.length === 0) {
  const names = (await readdir(KEPT).catch(() => [])).filter((n) => /^big-turn-.*\.json$/.test(n)).sort()
  paths = names.map((n) => join(KEPT, n))
}
if (paths.length === 0) {
  console.error(`no runs to pool: name their big-turn.json files, or keep them in ${KEPT}`)
  process.exit(2)
}

/** A run's host pairs (each an array of its rounds' overheads) and its CPU figures. */
async function load(path) {
  let data
  try {
    data = JSON.parse(await readFile(path, 'utf8'))
  } catch (error) {
    throw new Error(`${path}: not a big-turn.json (${error.message})`)
  }
  if (!Array.isArray(data?.pairs) || data.pairs.some((g) => !Array.isArray(g) || g.some((r) => typeof r?.pair !== 'number'))) {
    throw new Error(`${path}: no rounds in it (a big-turn.json keeps them under "pairs")`)
  }
  const rounds = data.pairs.flat()
  return {
    name: basename(path, '.json'),
    files: data.files,
    groups: data.pairs.map((g) => g.map((r) => r.pair)),
    cpu: median(rounds.map((r) => r.x.cpu)) / median(rounds.map((r) => r.y.cpu)) - 1,
  }
}

const runs = []
try {
  for (const path of paths) runs.push(await load(path))
} catch (error) {
  console.error(error.message)
  process.exit(2)
}
const sizes = new Set(runs.map((r) => r.files))
if (sizes.size > 1) {
  console.error(`the runs wrote different numbers of files per turn (${[...sizes].join(', ')}): they do not pool`)
  process.exit(2)
}

const pct = (x) => `${(x * 100).toFixed(1)} %`
const row = (name, groups, cpu) => {
  const values = groups.flat()
  const [lo, hi] = bootstrap(groups, median)
  const [mlo, mhi] = bootstrap(groups, mean)
  return `| ${name} | ${values.length} (${groups.length}) | ${pct(median(values))} (${pct(lo)} to ${pct(hi)}) | ${pct(mean(values))} (${pct(mlo)} to ${pct(mhi)}) | ${cpu === undefined ? '—' : `+${pct(cpu)}`} |`
}

const all = runs.flatMap((r) => r.groups)
const medians = runs.map((r) => median(r.groups.flat()))
const lines = [
  `## One turn writing ${([...sizes][0] ?? 5000).toLocaleString('en')} files: runs pooled`,
  '',
  `${runs.length} runs of \`benches/big-turn.mjs\`, each round's overhead a with/without pair run back to back; the intervals are 95 % bootstrap intervals over the host pairs (the rounds of one pair of host processes drawn together).`,
  '',
  '| run | rounds (host pairs) | median of pairs (95 % interval) | mean of pairs (95 % interval) | CPU |',
  '|---|---|---|---|---|',
  ...runs.map((r) => row(r.name, r.groups, r.cpu)),
  row('**all pooled**', all),
  '',
  `The runs' own medians: ${medians.map(pct).join(', ')} (from ${pct(Math.min(...medians))} to ${pct(Math.max(...medians))}); goal ≤ 10 %: ${medians.every((m) => m <= 0.1) ? 'every run under it' : `${medians.filter((m) => m > 0.1).length} of ${medians.length} runs over it`}.`,
  '',
]
await mkdir(join(ROOT, 'target', 'bench-results'), { recursive: true })
await writeFile(join(ROOT, 'target', 'bench-results', 'big-turn-pool.md'), lines.join('\n'))
console.log(lines.join('\n'))
