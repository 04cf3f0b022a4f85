/**
 * RFC 3339 timestamps, normalised once at the edge.
 *
 * Google sends 0, 3, 6 or 9 fractional digits and sometimes offsets, so the raw
 * strings do not compare correctly ("...:05Z" > "...:05.100Z"). Every time is
 * turned into one fixed-width UTC form, `YYYY-MM-DDTHH:MM:SS.fffffffffZ`, whose
 * string order is time order (years 0000-9999).
 */
export class InvalidTimeError extends Error {
  override name = 'InvalidTimeError';
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

export function normalizeTime(input: string): string {
  const m = RFC3339.exec(input);
  if (!m) throw new InvalidTimeError(`not an RFC 3339 timestamp: ${JSON.stringify(input.slice(0, 64))}`);
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const offsetSign = m[9] === '-' ? -1 : 1;
  const offsetHours = m[8] ? 0 : Number(m[10]);
  const offsetMinutes = m[8] ? 0 : Number(m[11]);
  if (
    month < 1 ||
    month > 12 ||
    day < 1 ||
    day > daysInMonth(year, month) ||
    hour > 23 ||
    minute > 59 ||
    second > 59 ||
    offsetHours > 23 ||
    offsetMinutes > 59
  ) {
    throw new InvalidTimeError(`timestamp out of range: ${JSON.stringify(input)}`);
  }
  const localMs = utcMillis(year, month, day, hour, minute, second);
  const utcMs = localMs - offsetSign * (offsetHours * 60 + offsetMinutes) * 60_000;
  const utc = new Date(utcMs);
  const utcYear = utc.getUTCFullYear();
  if (utcYear < 0 || utcYear > 9999) throw new InvalidTimeError(`timestamp out of range: ${JSON.stringify(input)}`);
  const fraction = (m[7] ?? '').padEnd(9, '0');
  return `${pad(utcYear, 4)}-${pad(utc.getUTCMonth() + 1, 2)}-${pad(utc.getUTCDate(), 2)}T${pad(utc.getUTCHours(), 2)}:${pad(
    utc.getUTCMinutes(),
    2,
  )}:${pad(utc.getUTCSeconds(), 2)}.${fraction}Z`;
}

/** A wall-clock instant in the normalised form (millisecond precision). */
export function timeFromDate(date: Date): string {
  return normalizeTime(date.toISOString());
}

/** `ms` after a normalised time, normalised (millisecond precision); the time itself when it does not parse as one. */
export function timeAfter(time: string, ms: number): string {
  const at = Date.parse(time);
  return Number.isNaN(at) ? time : timeFromDate(new Date(at + ms));
}

function utcMillis(year: number, month: number, day: number, hour: number, minute: number, second: number): number {
  const d = new Date(0);
  // setUTCFullYear keeps years 0-99 literal, where Date.UTC would map them to 19xx.
  d.setUTCFullYear(year, month - 1, day);
  d.setUTCHours(hour, minute, second, 0);
  return d.getTime();
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

function pad(n: number, width: number): string {
  return String(n).padStart(width, '0');
}
