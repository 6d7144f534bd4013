/*
 * Arithmetic and comparison of two numbers, shared by LogQL (binary operations, label filters) and TraceQL
 * (field arithmetic).
 */

export type ArithmeticOperator = '+' | '-' | '*' | '/' | '%' | '^';
export type ComparisonOperator = '==' | '!=' | '>' | '>=' | '<' | '<=';

const ARITHMETIC: ReadonlySet<string> = new Set(['+', '-', '*', '/', '%', '^']);
const COMPARISON: ReadonlySet<string> = new Set(['==', '!=', '>', '>=', '<', '<=']);

export function isArithmetic(op: string): op is ArithmeticOperator {
  return ARITHMETIC.has(op);
}

export function isComparison(op: string): op is ComparisonOperator {
  return COMPARISON.has(op);
}

export function applyArithmetic(op: ArithmeticOperator, a: number, b: number): number {
  switch (op) {
    case '+':
      return a + b;
    case '-':
      return a - b;
    case '*':
      return a * b;
    case '/':
      return a / b;
    case '%':
      return a % b;
    case '^':
      return a ** b;
  }
}

export function applyComparison(op: ComparisonOperator, a: number, b: number): boolean {
  switch (op) {
    case '==':
      return a === b;
    case '!=':
      return a !== b;
    case '>':
      return a > b;
    case '>=':
      return a >= b;
    case '<':
      return a < b;
    case '<=':
      return a <= b;
  }
}
