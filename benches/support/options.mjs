/**
 * What the addon benches read from the environment: lists of whole numbers, and the builds of the
 * addon to time (this checkout's, and another one to alternate with it for an A/B).
 */
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const ROOT = dirname(dirname(dirname(fileURLToPath(import.meta.url))))
const require = createRequire(import.meta.url)

/** The whole numbers (at least `least`) separated by commas in `process.env[name]`, else in `fallback`. */
export function numbers(name, fallback, least = 1) {
  const list = (process.env[name] ?? fallback).split(',').map(Number)
  for (const n of list) {
    if (!(Number.isInteger(n) && n >= least)) throw new Error(`${name}: whole numbers of at least ${least} separated by commas, not ${process.env[name]}`)
  }
  return list
}

/**
 * The builds of the addon a bench times, each `{ name, path, BindingStore }`: this checkout's
 * (`native/`, or the file `process.env[nativeVar]` names) and, when `process.env[abVar]` names
 * one, another build alternated with it.
 */
export function addonBuilds(nativeVar, abVar) {
  return [
    { name: 'this build', path: process.env[nativeVar] ?? join(ROOT, 'native', 'dsh-prompt-rewind.linux-x64-gnu.node') },
    ...(process.env[abVar] ? [{ name: 'other build', path: process.env[abVar] }] : []),
  ].map((b) => ({ ...b, BindingStore: require(b.path).BindingStore }))
}
