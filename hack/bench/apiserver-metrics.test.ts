import { describe, expect, it } from 'vitest';
import {
  diffHistograms,
  histogramQuantile,
  requestLatencies,
  writesByResource,
  writesIn,
  writeCounts,
} from './apiserver-metrics.js';

const scrape = (n1: number, n2: number, sum: number): string =>
  [
    '# HELP apiserver_request_duration_seconds [STABLE] Response latency',
    '# TYPE apiserver_request_duration_seconds histogram',
    `apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="oscar.dev",resource="operatingsystemconfigs",scope="resource",subresource="",verb="APPLY",version="v1alpha1",le="0.1"} ${String(n1)}`,
    `apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="oscar.dev",resource="operatingsystemconfigs",scope="resource",subresource="",verb="APPLY",version="v1alpha1",le="0.2"} ${String(n2)}`,
    `apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="oscar.dev",resource="operatingsystemconfigs",scope="resource",subresource="",verb="APPLY",version="v1alpha1",le="+Inf"} ${String(n2)}`,
    `apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="oscar.dev",resource="operatingsystemconfigs",scope="resource",subresource="",verb="APPLY",version="v1alpha1"} ${String(sum)}`,
    `apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="oscar.dev",resource="operatingsystemconfigs",scope="resource",subresource="",verb="APPLY",version="v1alpha1"} ${String(n2)}`,
    `apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1"} 7`,
  ].join('\n');

describe('apiserver metrics', () => {
  it('keeps only the resources asked for, keyed by verb and resource', () => {
    const set = requestLatencies(scrape(1, 2, 0.3), ['operatingsystemconfigs']);
    expect([...set.keys()]).toEqual(['APPLY operatingsystemconfigs']);
    expect(set.get('APPLY operatingsystemconfigs')?.count).toBe(2);
  });

  it('subtracts a scrape taken before a phase', () => {
    const before = requestLatencies(scrape(10, 10, 0.5), ['operatingsystemconfigs']);
    const after = requestLatencies(scrape(10, 30, 3.5), ['operatingsystemconfigs']);
    const d = diffHistograms(before, after).get('APPLY operatingsystemconfigs');
    expect(d?.count).toBe(20);
    expect(d?.sum).toBeCloseTo(3.0);
    // All 20 requests of the phase fell between 0.1 s and 0.2 s.
    expect(d && histogramQuantile(d, 0.5)).toBeCloseTo(0.15);
    expect(d && histogramQuantile(d, 1)).toBeCloseTo(0.2);
  });

  it('drops series with no requests in the phase', () => {
    const s = requestLatencies(scrape(1, 2, 0.3), ['operatingsystemconfigs']);
    expect(diffHistograms(s, s).size).toBe(0);
  });

  it('counts mutating requests of every client, and nothing else', () => {
    const text = [
      '# HELP apiserver_request_total x',
      'apiserver_request_total{code="201",resource="nodes",verb="POST"} 3',
      'apiserver_request_total{code="200",resource="nodes",verb="PATCH"} 10',
      'apiserver_request_total{code="200",resource="leases",verb="PUT"} 7',
      'apiserver_request_total{code="200",resource="secrets",verb="APPLY"} 2',
      'apiserver_request_total{code="200",resource="nodes",verb="DELETE"} 1',
      'apiserver_request_total{code="200",resource="nodes",verb="GET"} 99',
      'apiserver_request_total{code="200",resource="nodes",verb="WATCH"} 5',
      'apiserver_request_duration_seconds_count{verb="PATCH"} 50',
    ].join('\n');
    expect(writesIn(text)).toBe(23);
    expect(writesByResource(text)).toEqual(
      new Map([
        ['nodes', 14],
        ['leases', 7],
        ['secrets', 2],
      ]),
    );
    expect(
      writesByResource(
        'apiserver_request_total{resource="nodes",subresource="status",verb="PATCH"} 4',
      ),
    ).toEqual(new Map([['nodes/status', 4]]));
  });

  it('counts write requests only, by verb and resource', () => {
    const set = requestLatencies(scrape(1, 2, 0.3), ['operatingsystemconfigs', 'pods']);
    const w = writeCounts(set);
    expect(w.total).toBe(2);
    expect([...w.byKey]).toEqual([['APPLY operatingsystemconfigs', 2]]);
  });
});
