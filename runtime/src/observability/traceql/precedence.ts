/*
 * Re-association of operator chains with Tempo's precedence. Grafana's lezer grammar is written for highlighting: its
 * precedences differ from Tempo's parser (`!` binds loosest, `&&` tighter than `||`, every arithmetic operator at one
 * level, structural operators above `|`). The converter flattens each chain the grammar produced — operands (leaves
 * and parenthesised groups), prefix operators and binary operators, in source order — and this climber rebuilds it as
 * Tempo's yacc grammar (pkg/traceql/expr.y) would:
 *   |  <  && ||  <  = != < <= > >= =~ !~ and structural ops  <  + -  <  !  <  * / %  <  ^ (right)  <  unary minus.
 */

export type ChainItem<T> =
  | { readonly kind: 'operand'; readonly value: T }
  | { readonly kind: 'binary'; readonly op: string }
  | { readonly kind: 'prefix'; readonly op: string };

const BINARY: Readonly<Record<string, number>> = {
  '|': 1,
  '&&': 2,
  '||': 2,
  '=': 3,
  '!=': 3,
  '<': 3,
  '<=': 3,
  '>': 3,
  '>=': 3,
  '=~': 3,
  '!~': 3,
  '>>': 3,
  '<<': 3,
  '~': 3,
  '!>': 3,
  '!<': 3,
  '!>>': 3,
  '!<<': 3,
  '&>': 3,
  '&<': 3,
  '&>>': 3,
  '&<<': 3,
  '&~': 3,
  '+': 4,
  '-': 4,
  '*': 6,
  '/': 6,
  '%': 6,
  '^': 7,
};
/** Binding power of a prefix operator: its operand takes only operators binding tighter. */
const PREFIX: Readonly<Record<string, number>> = { '!': 5, '-': 8 };

export interface Builders<T> {
  binary(op: string, left: T, right: T): T;
  prefix(op: string, operand: T): T;
}

export function reassociate<T>(items: readonly ChainItem<T>[], build: Builders<T>): T {
  let pos = 0;
  const parse = (minPrec: number): T => {
    let left = primary();
    for (;;) {
      const item = items[pos];
      if (item?.kind !== 'binary') return left;
      const prec = BINARY[item.op] ?? 3;
      if (prec < minPrec) return left;
      pos++;
      // `^` is right-associative; everything else left.
      const right = parse(item.op === '^' ? prec : prec + 1);
      left = build.binary(item.op, left, right);
    }
  };
  const primary = (): T => {
    const item = items[pos++];
    if (item === undefined) throw new Error('operator chain ends with an operator');
    if (item.kind === 'operand') return item.value;
    if (item.kind === 'prefix') return build.prefix(item.op, parse(PREFIX[item.op] ?? 8));
    throw new Error(`operator chain has ${item.op} where an operand belongs`);
  };
  const out = parse(0);
  if (pos !== items.length) throw new Error('operator chain not fully consumed');
  return out;
}
