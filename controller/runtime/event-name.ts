/**
 * The name of an Event about an object: `<object name>.<16 hex>`, as client-go names them. An
 * object's name may take all 253 characters a name may have (an OscarConfig, a Machine's), so the
 * object's part is shortened when the whole would not fit: otherwise the API server refuses the
 * Event and the Warning it carries is lost.
 */
import { randomBytes } from 'node:crypto';

const NAME_MAX = 253;

export function eventName(objectName: string, suffix = randomBytes(8).toString('hex')): string {
  const room = NAME_MAX - 1 - suffix.length;
  // A DNS subdomain's labels end in a letter or digit: no "-" or "." before the ".".
  const base =
    objectName.length <= room ? objectName : objectName.slice(0, room).replace(/[-.]+$/, '');
  return `${base}.${suffix}`;
}
