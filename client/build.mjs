// Builds the browser half into ../lib/client.js: one classic script that registers through
// window.__ModuleLoader__.load({ id, factory }) and takes React and react-dom from the loader's
// require (never bundled).   usage: node client/build.mjs [--tests]
//   --tests  also compiles the pure modules to client/.test-build/*.mjs for `node --test client/test/*.test.mjs`.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
// The client's own dev dependencies (client/package-lock.json) are installed on first use.
if (!existsSync(join(here, 'node_modules', 'esbuild'))) {
  console.log('client: npm ci (client/package-lock.json)')
  const r = spawnSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: here, stdio: 'inherit' })
  if (r.status !== 0) process.exit(r.status ?? 1)
}
const { build } = await import('esbuild')
const out = join(here, '..', 'lib', 'client.js')
const ID = 'dsh-prompt-rewind'
const EXTERNAL = ['react', 'react-dom', 'react/jsx-runtime', 'react-dom/client']

const result = await build({
  entryPoints: [join(here, 'src', 'index.tsx')],
  bundle: true,
  write: false,
  format: 'cjs',
  platform: 'browser',
  target: 'es2022',
  jsx: 'automatic',
  external: EXTERNAL,
  legalComments: 'none',
  charset: 'utf8',
  logLevel: 'warning',
})
const body = result.outputFiles[0].text
const wrapped = `/* ${ID} browser half (built by client/build.mjs; do not edit) */
window.__ModuleLoader__.load({
  id: ${JSON.stringify(ID)},
  factory: (require) => {
    var module = { exports: {} };
    var exports = module.exports;
${body}
    return module.exports;
  }
});
`
mkdirSync(dirname(out), { recursive: true })
writeFileSync(out, wrapped)
const pkg = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8'))
console.log(`client: wrote ${out} (${wrapped.length} bytes, ${pkg.name})`)

if (process.argv.includes('--tests')) {
  const testOut = join(here, '.test-build')
  mkdirSync(testOut, { recursive: true })
  await build({
    entryPoints: ['hidden', 'picker', 'i18n', 'history', 'store', 'escape', 'chat', 'host', 'services', 'doctor', 'rpc', 'warnings'].map(n => join(here, 'src', `${n}.ts`)),
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    outdir: testOut,
    outExtension: { '.js': '.mjs' },
    logLevel: 'warning',
  })
  console.log(`client: wrote test modules to ${testOut}`)
}
