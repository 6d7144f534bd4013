import { describe, expect, it } from 'vitest';
import { StateCache, type StateEntry } from '../../../runtime/src/engine/state-cache.ts';

const b = (s: string): Buffer => Buffer.from(s);
const entries = (state: StateEntry[] | undefined): Record<string, string> | undefined =>
  state === undefined
    ? undefined
    : Object.fromEntries(state.map((e) => [Buffer.from(e.key).toString(), Buffer.from(e.value).toString()]));

describe('StateCache', () => {
  it('serves what a read filled and follows committed changes in order', () => {
    const cache = new StateCache(10);
    expect(cache.get('O/k')).toBeUndefined();
    const read = cache.beginRead('O/k');
    cache.fill(read, [
      { key: b('b'), value: b('1') },
      { key: b('a'), value: b('2') },
    ]);
    expect(entries(cache.get('O/k'))).toEqual({ a: '2', b: '1' });
    expect(cache.get('O/k')!.map((e) => Buffer.from(e.key).toString())).toEqual(['a', 'b']);
    cache.apply('O/k', { kind: 'set', key: b('c'), value: b('3') });
    cache.apply('O/k', { kind: 'clear', key: b('a') });
    expect(entries(cache.get('O/k'))).toEqual({ b: '1', c: '3' });
    cache.apply('O/k', { kind: 'clearAll' });
    cache.apply('O/k', { kind: 'set', key: b('d'), value: b('4') });
    expect(entries(cache.get('O/k'))).toEqual({ d: '4' });
  });

  it('never installs a read that a commit of the same key overlapped', () => {
    const cache = new StateCache(10);
    const read = cache.beginRead('O/k');
    cache.apply('O/k', { kind: 'set', key: b('a'), value: b('new') });
    cache.fill(read, [{ key: b('a'), value: b('old') }]);
    expect(cache.get('O/k')).toBeUndefined();
    // Another key's commit does not spoil a read.
    const other = cache.beginRead('O/k');
    cache.apply('O/j', { kind: 'set', key: b('a'), value: b('x') });
    cache.fill(other, [{ key: b('a'), value: b('new') }]);
    expect(entries(cache.get('O/k'))).toEqual({ a: 'new' });
  });

  it('re-applying committed changes that a read already saw changes nothing', () => {
    const cache = new StateCache(10);
    const read = cache.beginRead('O/k');
    // The read saw the result of clearAll + set x (committed before its snapshot) ...
    cache.fill(read, [{ key: b('x'), value: b('1') }]);
    // ... whose commit notifications arrive after it.
    cache.apply('O/k', { kind: 'clearAll' });
    cache.apply('O/k', { kind: 'set', key: b('x'), value: b('1') });
    expect(entries(cache.get('O/k'))).toEqual({ x: '1' });
  });

  it('drops a key on invalidate and everything on clear, spoiling reads in flight', () => {
    const cache = new StateCache(10);
    cache.fill(cache.beginRead('O/k'), [{ key: b('a'), value: b('1') }]);
    cache.fill(cache.beginRead('O/j'), [{ key: b('a'), value: b('1') }]);
    const inFlight = cache.beginRead('O/k');
    cache.invalidate('O/k');
    expect(cache.get('O/k')).toBeUndefined();
    cache.fill(inFlight, [{ key: b('a'), value: b('1') }]);
    expect(cache.get('O/k')).toBeUndefined();
    const again = cache.beginRead('O/i');
    cache.clear();
    expect(cache.get('O/j')).toBeUndefined();
    cache.fill(again, []);
    expect(cache.get('O/i')).toBeUndefined();
    // Applying to a key that is not cached keeps it uncached (its state is unknown).
    cache.apply('O/k', { kind: 'set', key: b('a'), value: b('2') });
    expect(cache.get('O/k')).toBeUndefined();
  });

  it('keeps at most maxKeys keys, least recently used out first, and no state over 64 KiB', () => {
    const cache = new StateCache(2);
    cache.fill(cache.beginRead('1'), []);
    cache.fill(cache.beginRead('2'), []);
    expect(cache.get('1')).toEqual([]); // 1 is now the most recently used
    cache.fill(cache.beginRead('3'), []);
    expect(cache.get('2')).toBeUndefined();
    expect(cache.get('1')).toEqual([]);
    expect(cache.size).toBe(2);
    cache.fill(cache.beginRead('big'), [{ key: b('a'), value: Buffer.alloc(70 * 1024) }]);
    expect(cache.get('big')).toBeUndefined();
    cache.apply('1', { kind: 'set', key: b('a'), value: Buffer.alloc(70 * 1024) });
    expect(cache.get('1')).toBeUndefined();
  });
});
