// Issue #16 asks that autoscaling leave the warm path's cost unchanged within noise. The holder is on no warm
// call's path (an App's Endpoints point at its pods whenever one is ready: test/operator/scale-to-zero.test.ts),
// so what autoscaling added to every warm call is the sidecar's load signal. This section sets the run's sidecar
// ÷ nginx throughput beside the same figure measured before autoscaling, and says which side of the noise it is.
import type { FigureResult, ReportSection } from './report.ts';
import { median } from './stats.ts';

/** The sync scenario at the commit before autoscaling (the load signal) was added, as measured then. */
const BEFORE_AUTOSCALING = {
  commit: '08756ed',
  ratios: [0.63, 0.63],
  how: '`npm run bench -- --scenarios sync --rounds 1`, two runs on a quiet machine, 2026-11-25',
};
/**
 * The rounds of one run spread by about this much around their median (bench/results.md of 2026-11-25 00:47:
 * 0.56–0.67 about 0.57): a smaller change is not told apart from the machine's noise by one run.
 */
const NOISE = 0.1;

export function warmPathSection(results: FigureResult[]): ReportSection | undefined {
  const now = results.find((result) => result.key === 'sync.throughputRatio');
  if (now === undefined || !Number.isFinite(now.median)) return undefined;
  const before = median(BEFORE_AUTOSCALING.ratios);
  const change = now.median / before - 1;
  const percent = `${Math.abs(Math.round(change * 100))} %`;
  const verdict =
    Math.abs(change) <= NOISE
      ? `unchanged within noise (${change < 0 ? '−' : '+'}${percent}; rounds of one run spread by about ±${NOISE * 100} %)`
      : change < 0
        ? `**lower by ${percent}**: beyond the ±${NOISE * 100} % the rounds of one run spread by, a regression of the warm path`
        : `higher by ${percent}`;
  return {
    title: 'Warm path since autoscaling (issue #16)',
    lines: [
      `Sidecar ÷ nginx throughput at 32 connections (the sync scenario, pod sidecar): ${now.median.toFixed(2)}× in this run ` +
        `(rounds ${now.min.toFixed(2)}–${now.max.toFixed(2)}), against ${BEFORE_AUTOSCALING.ratios.map((ratio) => `${ratio.toFixed(2)}×`).join(' and ')} ` +
        `before autoscaling (${BEFORE_AUTOSCALING.commit}: ${BEFORE_AUTOSCALING.how}): ${verdict}.`,
      '',
      'The holder is on no warm call\'s path: an App\'s Endpoints list its pods whenever one is ready. What autoscaling added to each warm ' +
        'call is the sidecar\'s load signal (calls counted in and out of its admission, sampled every 100 ms, written with the RunLog\'s ' +
        'run records). The two figures come from different runs and machine states; a change near the noise is settled by running both ' +
        'commits alternately on one machine.',
    ],
  };
}
