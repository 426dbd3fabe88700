/**
 * The client's name for the shared text escapes (`shared/format.ts`, the same rule as the host's
 * reports): a file name or message as one line of a list.
 */
export { escapeControl, oneLine } from '../../shared/format.ts'
