import { describe, expect, it } from 'vitest';
import type { FigureResult } from './report.ts';
import { warmPathSection } from './warm-path.ts';

function syncRatio(median: number, min = median, max = median): FigureResult {
  return { key: 'sync.throughputRatio', scenario: 'sync', label: 'sidecar ÷ nginx', unit: '×', values: [median], median, min, max, target: { op: '>=', value: 0.6 }, met: median >= 0.6 };
}

describe('the warm path section', () => {
  it('calls a ratio within 10 % of the one before autoscaling unchanged within noise', () => {
    const section = warmPathSection([syncRatio(0.6, 0.58, 0.66)])!;
    expect(section.title).toContain('#16');
    expect(section.lines[0]).toContain('0.60× in this run (rounds 0.58–0.66), against 0.63× and 0.63× before autoscaling (08756ed');
    expect(section.lines[0]).toContain('unchanged within noise (−5 %');
  });

  it('calls a ratio more than 10 % below it a regression', () => {
    const section = warmPathSection([syncRatio(0.49)])!;
    expect(section.lines[0]).toContain('**lower by 22 %**');
    expect(section.lines[0]).toContain('a regression of the warm path');
  });

  it('says nothing when the run did not measure the sync scenario', () => {
    expect(warmPathSection([])).toBeUndefined();
    expect(warmPathSection([syncRatio(Number.NaN)])).toBeUndefined();
  });
});
