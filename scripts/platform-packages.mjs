#!/usr/bin/env node
/**
 * The per-platform npm packages of the native addon (napi-rs layout): `npm/<target>/` holds the
 * package `dsh-prompt-rewind-<target>`, whose only file is `dsh-prompt-rewind.<target>.node`.
 * The plugin lists them as optional dependencies when it is published, so npm installs the one
 * matching the user's os / cpu / libc; a local build (`scripts/build.sh`) bundles the host's addon
 * in `native/` instead and stays the default build and test path.
 *
 *   node scripts/platform-packages.mjs check
 *       every target of package.json `napi.targets` has an npm/<target>/package.json that
 *       matches (name, version, main, files, os, cpu, libc), and js/src/native.ts lists the same
 *       targets; exits 1 naming each mismatch
 *   node scripts/platform-packages.mjs stage <target> <addon.node>
 *       copies a built addon into npm/<target>/ (release workflow)
 *   node scripts/platform-packages.mjs prepublish
 *       for every staged target (npm/<target>/<addon> present), adds the package to the root
 *       package.json `optionalDependencies` at the same version and drops native/ from `files`
 *       (release workflow only: it edits package.json in the checkout being published)
 */
import { copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = dirname(dirname(fileURLToPath(import.meta.url)))

/** Rust target triple → napi-rs target name, os, cpu, libc. */
const TRIPLES = {
  'aarch64-apple-darwin': { target: 'darwin-arm64', os: 'darwin', cpu: 'arm64' },
  'x86_64-apple-darwin': { target: 'darwin-x64', os: 'darwin', cpu: 'x64' },
  'x86_64-pc-windows-msvc': { target: 'win32-x64-msvc', os: 'win32', cpu: 'x64' },
  'x86_64-unknown-linux-gnu': { target: 'linux-x64-gnu', os: 'linux', cpu: 'x64', libc: 'glibc' },
  'aarch64-unknown-linux-gnu': { target: 'linux-arm64-gnu', os: 'linux', cpu: 'arm64', libc: 'glibc' },
  'x86_64-unknown-linux-musl': { target: 'linux-x64-musl', os: 'linux', cpu: 'x64', libc: 'musl' },
}

const readJson = (path) => JSON.parse(readFileSync(path, 'utf8'))
const main = () => readJson(join(root, 'package.json'))
const addonFile = (target) => `${main().napi.binaryName}.${target}.node`
const packageName = (target) => `${main().name}-${target}`

function targets() {
  return main().napi.targets.map((triple) => {
    const t = TRIPLES[triple]
    if (t === undefined) throw new Error(`package.json napi.targets: unknown triple ${triple}`)
    return { triple, ...t }
  })
}

function check() {
  const problems = []
  const pkg = main()
  const list = targets()
  for (const t of list) {
    const path = join(root, 'npm', t.target, 'package.json')
    if (!existsSync(path)) {
      problems.push(`npm/${t.target}/package.json is missing`)
      continue
    }
    const p = readJson(path)
    const want = {
      name: packageName(t.target),
      version: pkg.version,
      main: addonFile(t.target),
      files: JSON.stringify([addonFile(t.target)]),
      os: JSON.stringify([t.os]),
      cpu: JSON.stringify([t.cpu]),
      libc: JSON.stringify(t.libc === undefined ? undefined : [t.libc]),
    }
    const have = {
      name: p.name,
      version: p.version,
      main: p.main,
      files: JSON.stringify(p.files),
      os: JSON.stringify(p.os),
      cpu: JSON.stringify(p.cpu),
      libc: JSON.stringify(p.libc),
    }
    for (const k of Object.keys(want)) {
      if (want[k] !== have[k]) problems.push(`npm/${t.target}/package.json ${k}: ${have[k]}, expected ${want[k]}`)
    }
  }
  // The loader's list must be the same targets.
  const src = readFileSync(join(root, 'js', 'src', 'native.ts'), 'utf8')
  const m = /PLATFORM_TARGETS = \[([^\]]*)\]/.exec(src)
  const loader = m === null ? [] : [...m[1].matchAll(/'([^']+)'/g)].map((x) => x[1])
  const names = list.map((t) => t.target)
  if (JSON.stringify([...loader].sort()) !== JSON.stringify([...names].sort())) {
    problems.push(`js/src/native.ts PLATFORM_TARGETS [${loader.join(', ')}] differ from package.json napi.targets [${names.join(', ')}]`)
  }
  if (pkg.os !== undefined || pkg.cpu !== undefined) {
    problems.push('package.json must not restrict os / cpu: the plugin loads everywhere and names the missing binary')
  }
  if (problems.length > 0) {
    for (const p of problems) process.stderr.write(`platform-packages: ${p}\n`)
    process.exit(1)
  }
  process.stderr.write(`platform-packages: ${names.length} platform packages match (${names.join(', ')})\n`)
}

function stage(target, file) {
  if (!targets().some((t) => t.target === target)) throw new Error(`unknown target ${target}`)
  if (file === undefined || !existsSync(file)) throw new Error(`no addon file ${file}`)
  const dest = join(root, 'npm', target, addonFile(target))
  copyFileSync(file, dest)
  process.stderr.write(`platform-packages: ${file} → npm/${target}/${addonFile(target)}\n`)
}

function prepublish() {
  const pkg = main()
  const staged = targets().filter((t) => existsSync(join(root, 'npm', t.target, addonFile(t.target))))
  if (staged.length === 0) throw new Error('no platform package is staged (npm/<target>/<addon>): nothing to publish')
  pkg.optionalDependencies = Object.fromEntries(staged.map((t) => [packageName(t.target), pkg.version]))
  pkg.files = pkg.files.filter((f) => !f.startsWith('native/'))
  writeFileSync(join(root, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`)
  process.stderr.write(`platform-packages: optionalDependencies ${staged.map((t) => t.target).join(', ')}\n`)
}

try {
  const [cmd, ...rest] = process.argv.slice(2)
  if (cmd === 'check') check()
  else if (cmd === 'stage') stage(rest[0], rest[1])
  else if (cmd === 'prepublish') prepublish()
  else throw new Error('usage: platform-packages.mjs check | stage <target> <addon.node> | prepublish')
} catch (error) {
  process.stderr.write(`platform-packages: ${error instanceof Error ? error.message : String(error)}\n`)
  process.exit(1)
}
