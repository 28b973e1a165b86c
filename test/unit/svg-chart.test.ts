import { describe, expect, it } from 'vitest';
import { charts } from '../../bench/charts.ts';
import type { ManyDatabasesPoint } from '../../bench/many-databases.ts';
import { lineChart, niceTicks, tickLabel } from '../../bench/svg-chart.ts';

const run = (p50Ms: number) => ({ calls: 100, seconds: 1, callsPerSec: 100, p50Ms, p99Ms: p50Ms * 4 });
const point = (databases: number, p50Ms: number): ManyDatabasesPoint => ({
  databases,
  createSeconds: 1,
  startupMs: 1500,
  read: run(p50Ms),
  workerRssMb: 160,
  executorRssMb: [90, 90],
  totalRssMb: 340,
  backup: { seconds: 2, databases, failed: 0, againSeconds: 1 },
});

describe('lineChart', () => {
  it('draws one line and one legend entry per series, a point per value, as a standalone SVG', () => {
    const svg = lineChart({
      title: 'p50 <by> databases',
      xLabel: 'databases',
      yLabel: 'ms',
      logX: true,
      series: [
        {
          name: 'p50',
          points: [
            [10, 2],
            [1000, 2.2],
            [100_000, 2.3],
          ],
        },
        {
          name: 'p99 & more',
          points: [
            [10, 8],
            [1000, 9],
            [100_000, 12],
          ],
        },
      ],
    });
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    expect(svg.match(/<polyline /g)).toHaveLength(2);
    expect(svg.match(/<circle /g)).toHaveLength(6);
    // Text is escaped, never markup; log axis ticks at each power of ten.
    expect(svg).toContain('p50 &lt;by&gt; databases');
    expect(svg).toContain('p99 &amp; more');
    for (const t of ['10', '100', '1,000', '10,000', '100,000']) expect(svg).toContain(`>${t}</text>`);
    expect(svg).not.toMatch(/NaN|Infinity|<script/);
  });

  it('keeps every point inside the plot, the largest included', () => {
    const svg = lineChart({
      title: 't',
      xLabel: 'x',
      yLabel: 'y',
      series: [
        {
          name: 's',
          points: [
            [10, 5],
            [1000, 110],
          ],
        },
      ],
      logX: true,
    });
    const ys = [...svg.matchAll(/<circle cx="[\d.]+" cy="([\d.]+)"/g)].map((m) => Number(m[1]));
    for (const y of ys) expect(y).toBeGreaterThanOrEqual(40);
  });

  it('places a larger value higher on the page', () => {
    const svg = lineChart({
      title: 't',
      xLabel: 'x',
      yLabel: 'y',
      series: [
        {
          name: 's',
          points: [
            [1, 1],
            [2, 10],
          ],
        },
      ],
    });
    const ys = [...svg.matchAll(/<circle cx="[\d.]+" cy="([\d.]+)"/g)].map((m) => Number(m[1]));
    expect(ys[1]!).toBeLessThan(ys[0]!);
  });

  it('refuses a chart with no points', () => {
    expect(() => lineChart({ title: 'empty', xLabel: 'x', yLabel: 'y', series: [] })).toThrow(/no points/);
  });
});

describe('ticks', () => {
  it('steps by 1, 2 or 5 times a power of ten', () => {
    expect(niceTicks(0, 10)).toEqual([0, 2, 4, 6, 8, 10]);
    expect(niceTicks(0, 23)).toEqual([0, 5, 10, 15, 20, 25]);
    expect(niceTicks(0, 121)).toEqual([0, 50, 100, 150]);
    expect(tickLabel(100_000)).toBe('100,000');
    expect(tickLabel(0.25)).toBe('0.25');
  });
});

describe('charts', () => {
  it('draws p50/p99, memory and start-up/backup by databases, and throughput by concurrency', () => {
    const query = { sequential: { rawBullmq: run(0.6), agentdb: run(0.8) }, inFlight64: { rawBullmq: run(9), agentdb: run(11) } };
    const drawn = charts([point(10, 2), point(1000, 2.1), point(10_000, 2.2)], query);
    expect(Object.keys(drawn).sort()).toEqual([
      'memory-by-databases.svg',
      'pk-read-by-databases.svg',
      'startup-backup-by-databases.svg',
      'throughput-by-concurrency.svg',
    ]);
    expect(drawn['pk-read-by-databases.svg']!.series.map((s) => s.points.map(([x]) => x))).toEqual([
      [10, 1000, 10_000],
      [10, 1000, 10_000],
    ]);
    expect(drawn['throughput-by-concurrency.svg']!.series.map((s) => s.name)).toEqual(['raw BullMQ', 'agentdb']);
    expect(charts(undefined, undefined)).toEqual({});
  });
});
