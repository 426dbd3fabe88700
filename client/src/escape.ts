/**
 * A file name or message as one line of a list: control characters (C0, DEL, C1, and the Unicode
 * line and paragraph separators) become `\xNN` / `\uNNNN` escapes and a backslash becomes `\\`,
 * the same rule as the host's reports, so a name can never split a line or pass for two.
 * @param text - raw text.
 * @returns the escaped text.
 */
export function escapeControl(text: string): string {
  return text.replace(/[\\\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, (c) => {
    if (c === '\\') return '\\\\'
    const code = c.charCodeAt(0)
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`
  })
}

/**
 * A message's text on one line: every run of control characters (newlines included) becomes one
 * space. For prose, where a backslash is just a character (file names use {@link escapeControl}).
 * @param text - raw text.
 * @returns the text on one line.
 */
export function oneLine(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' ').trim()
}
