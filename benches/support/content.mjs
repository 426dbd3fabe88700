/**
 * The file content the addon benches' write-tool calls write: `size` bytes of a fixed pattern
 * with the call's number in the first four, so every call writes content of its own (as an edit
 * does) and the store never finds it kept already.
 * @param {number} size
 * @returns {(i: number) => Buffer} the content of call `i` (a fresh buffer each time)
 */
export function callContent(size) {
  const base = Buffer.alloc(size)
  for (let k = 0; k < size; k++) base[k] = (k * 31) ^ (k >> 7)
  return (i) => {
    const b = Buffer.from(base)
    b.writeInt32LE(i, 0)
    return b
  }
}
