/**
 * PostgreSQL's text output, read back for rendering. Every introspection session runs with TimeZone UTC, DateStyle
 * ISO, IntervalStyle iso_8601 and bytea_output hex (query.ts), so these are the only spellings to expect.
 */

/** `2026-11-21 20:46:13.637+00` (or without the offset) → epoch milliseconds; infinities → undefined. */
export function parseTimestamp(text: string): number | undefined {
  const m =
    /^(\d{4,})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))?(?:([+-]\d\d)(?::?(\d\d))?(?::?(\d\d))?)?( BC)?$/.exec(
      text,
    );
  if (m === null) return undefined;
  const [, y, mo, d, h, mi, s, frac, offH, offM, offS, bc] = m;
  let year = Number(y);
  if (bc !== undefined) year = 1 - year;
  const millis = frac === undefined ? 0 : Math.floor(Number(`0.${frac}`) * 1000);
  const utc = Date.UTC(year, Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s), millis);
  // Date.UTC maps years 0–99 to 1900–1999.
  const fixed = year >= 0 && year < 100 ? new Date(utc).setUTCFullYear(year) : utc;
  if (offH === undefined) return fixed;
  const sign = offH.startsWith('-') ? -1 : 1;
  const offset = sign * (Math.abs(Number(offH)) * 3600 + Number(offM ?? 0) * 60 + Number(offS ?? 0)) * 1000;
  return fixed - offset;
}

/** ISO 8601 interval (`PT2H`, `P1Y2M3DT-4H5.5S`) → milliseconds; a month counts 30 days, a year 365.25 days. */
export function parseInterval(text: string): number | undefined {
  const m =
    /^P(?:(-?\d+)Y)?(?:(-?\d+)M)?(?:(-?\d+)W)?(?:(-?\d+)D)?(?:T(?:(-?\d+)H)?(?:(-?\d+)M)?(?:(-?\d+(?:\.\d+)?)S)?)?$/.exec(
      text,
    );
  if (m === null) return undefined;
  const n = (v: string | undefined): number => (v === undefined ? 0 : Number(v));
  const days = n(m[1]) * 365.25 + n(m[2]) * 30 + n(m[3]) * 7 + n(m[4]);
  const seconds = ((days * 24 + n(m[5])) * 60 + n(m[6])) * 60 + n(m[7]);
  return Math.round(seconds * 1000);
}

/** `\x6869` → bytes. */
export function parseBytea(text: string): Buffer {
  return text.startsWith('\\x') ? Buffer.from(text.slice(2), 'hex') : Buffer.from(text, 'latin1');
}

/** A one-dimensional array literal (`{a,"b c",NULL}`) → its elements' text (NULL → null). */
export function parseArray(text: string): (string | null)[] {
  const body = text.replace(/^\[[^\]]*\]=/, '');
  if (!body.startsWith('{') || !body.endsWith('}')) return [text];
  const inner = body.slice(1, -1);
  const out: (string | null)[] = [];
  if (inner === '') return out;
  let i = 0;
  while (i <= inner.length) {
    if (inner[i] === '"') {
      let value = '';
      i++;
      while (i < inner.length && inner[i] !== '"') {
        if (inner[i] === '\\') i++;
        value += inner[i] ?? '';
        i++;
      }
      out.push(value);
      i += 2; // closing quote and comma
    } else {
      const end = inner.indexOf(',', i);
      const raw = inner.slice(i, end === -1 ? inner.length : end);
      out.push(raw === 'NULL' ? null : raw);
      if (end === -1) break;
      i = end + 1;
    }
  }
  return out;
}
