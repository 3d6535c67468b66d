import { describe, expect, it } from 'vitest';
import { eventName } from './event-name.js';

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

describe('eventName (red-team round 3: derived names that overflow)', () => {
  it('a short name keeps its whole name and a random suffix', () => {
    expect(eventName('m1', '0123456789abcdef')).toBe('m1.0123456789abcdef');
    expect(eventName('m1')).toMatch(/^m1\.[0-9a-f]{16}$/);
  });

  it('an object name of 253 characters gives an Event name the API server takes', () => {
    for (const name of [
      'a'.repeat(253),
      `${'a'.repeat(235)}-${'b'.repeat(17)}`,
      `${'a'.repeat(235)}.b${'c'.repeat(16)}`,
    ]) {
      const event = eventName(name);
      expect(event.length).toBeLessThanOrEqual(253);
      expect(event).toMatch(DNS_SUBDOMAIN);
      expect(event.startsWith(name.slice(0, 200))).toBe(true);
    }
  });
});
