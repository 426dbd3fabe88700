/** What rewind-crash-child.mjs writes, shared with rewind-crash.test.mjs. */
export const SESSION = 'crash-session'
/** Files the second turn creates (so a restore has many actions to be killed in). */
export const MANY = 40
export const manyName = i => `f/${String(i).padStart(2, '0')}.txt`
export const manyContent = i => `file ${i}\n${'x'.repeat(2000)}\n`
