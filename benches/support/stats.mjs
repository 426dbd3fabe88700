/** Summary statistics shared by the benches. */

/** The value at fraction `q` of `xs` sorted (0.5: the median, the upper one of an even count). */
export const quartile = (xs, q) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(s.length * q))] }
export const median = (xs) => quartile(xs, 0.5)
export const mean = (xs) => xs.reduce((t, x) => t + x, 0) / xs.length

/**
 * A 95 % confidence interval of `stat` over the values of `groups` (an array of arrays): the
 * 2.5th and 97.5th percentiles of `stat` over 10,000 resamples that draw whole groups with
 * replacement (values that share a cause of drift, such as the rounds of one host pair, are drawn
 * together; give each value a group of its own when none do). A fixed seed, so a run's figures
 * can be computed again from its values.
 */
export function bootstrap(groups, stat) {
  let seed = 0x9e3779b9
  const rand = () => {
    seed ^= seed << 13; seed >>>= 0
    seed ^= seed >>> 17
    seed ^= seed << 5; seed >>>= 0
    return seed / 0x100000000
  }
  const stats = []
  for (let k = 0; k < 10_000; k++) stats.push(stat(groups.flatMap(() => groups[Math.floor(rand() * groups.length)])))
  return [quartile(stats, 0.025), quartile(stats, 0.975)]
}
