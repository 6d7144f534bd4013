import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, isErrorCode } from '../../../runtime/src/errors/codes.ts';

const docsDir = fileURLToPath(new URL('../../../runtime/src/errors/docs/', import.meta.url));
const codes = Object.keys(ERROR_CODES);
const docFiles = readdirSync(docsDir);

describe('error code registry', () => {
  it('has exactly the codes of the specification catalogue', () => {
    const meta = [
      '0003',
      '0004',
      '0005',
      '0006',
      '0009',
      '0010',
      '0011',
      '0012',
      '0013',
      '0014',
      '0015',
      '0016',
      '0017',
    ];
    const rt = Array.from({ length: 25 }, (_, i) => String(i + 1).padStart(4, '0')).filter((n) => n !== '0008');
    expect(codes.sort()).toEqual([...meta.map((n) => `META${n}`), ...rt.map((n) => `RT${n}`)].sort());
  });

  it('has a doc page for every code, and a code for every doc page', () => {
    expect(
      docFiles
        .filter((f) => f.endsWith('.md'))
        .map((f) => f.slice(0, -3))
        .sort(),
    ).toEqual([...codes].sort());
    expect(docFiles.every((f) => f.endsWith('.md'))).toBe(true);
  });

  it.each(codes)('%s has a title, a description and a page saying when it happens and how to fix it', (code) => {
    const info = ERROR_CODES[code as keyof typeof ERROR_CODES];
    expect(info.title.length).toBeGreaterThan(0);
    expect(info.description.length).toBeGreaterThan(20);
    const page = readFileSync(`${docsDir}${code}.md`, 'utf8');
    expect(page.startsWith(`# ${code}: `)).toBe(true);
    expect(page).toContain('## When it happens');
    expect(page).toContain('## How to fix it');
  });

  it('recognises codes', () => {
    expect(isErrorCode('RT0002')).toBe(true);
    expect(isErrorCode('RT0008')).toBe(false);
    expect(isErrorCode('toString')).toBe(false);
  });
});
