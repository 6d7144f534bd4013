import { describe, expect, it } from 'vitest';

import { IngressError } from '../../../runtime/src/ingress/errors.ts';
import { parseAwakeableIdParam, queryInvocationId } from '../../../runtime/src/ingress/ids.ts';
import { parseTargetBody } from '../../../runtime/src/ingress/target-body.ts';

function errorOf(fn: () => unknown): { status: number; message: string } {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(IngressError);
    return { status: (err as IngressError).status, message: (err as IngressError).message };
  }
  throw new Error('did not throw');
}

const body = (text: string) => Buffer.from(text);
const lookupError = (text: string) => errorOf(() => parseTargetBody(body(text), 'lookup'));

describe('target bodies of /restate/attach|output|lookup', () => {
  it('reads the three targets, ignoring unknown fields, and computes restate ids (shared/spec §D)', () => {
    const wf = parseTargetBody(
      body('{"target":"workflow","workflowName":"Signup","workflowKey":"u1","x":1}'),
      'lookup',
    );
    expect(queryInvocationId(wf)).toBe('inv_1jkk5Pppv5gg261fvsMf0rl4keL2QuVYRa');
    const idem = parseTargetBody(
      body('{"target":"idempotentInvocation","service":"Counter","key":"k3","handler":"add","idempotencyKey":"c-1"}'),
      'request',
    );
    expect(queryInvocationId(idem)).toBe('inv_1ceQMii6q8iL7yDzWEbdirQIjEtELrlgv5');
    const unkeyed = parseTargetBody(
      body(
        '{"target":"idempotentInvocation","service":"Greeter","key":null,"handler":"greet","idempotencyKey":"idem-1"}',
      ),
      'lookup',
    );
    expect(queryInvocationId(unkeyed)).toBe('inv_1arJqkEd7c2K5D6QZl1EpZ9Swb2nQWoDR4');
    const byId = parseTargetBody(
      body('{"target":"invocation","invocationId":"inv_1arJqkEd7c2K5D6QZl1EpZ9Swb2nQWoDR4"}'),
      'lookup',
    );
    expect(byId).toEqual({ kind: 'invocation', id: 'inv_1arJqkEd7c2K5D6QZl1EpZ9Swb2nQWoDR4' });
  });

  it('puts scoped targets on the partition key of the scope (ids returned by restate-server 1.7.12)', () => {
    const wf = parseTargetBody(
      body('{"target":"workflow","workflowName":"Signup","workflowKey":"u1","scope":"s1"}'),
      'lookup',
    );
    expect(queryInvocationId(wf)).toBe('inv_1a1mlWikgvPI1o469Uk9xTa4swQklpNuMb');
    const idem = parseTargetBody(
      body(
        '{"target":"idempotentInvocation","service":"Greeter","handler":"greet","idempotencyKey":"idem-1","scope":"s1"}',
      ),
      'lookup',
    );
    expect(queryInvocationId(idem)).toBe('inv_1a1mlWikgvPI6EpL5CxK4o4P7rPzL3ZFS5');
  });

  it("answers undeserializable bodies with restate's 500 and serde's wording", () => {
    const e500 = (detail: string) => ({ status: 500, message: `cannot read body: invalid lookup body: ${detail}` });
    expect(lookupError('')).toEqual(e500('EOF while parsing a value at line 1 column 0'));
    expect(lookupError('garbage')).toEqual(e500('expected value at line 1 column 1'));
    expect(lookupError('{"x":1}')).toEqual(e500('missing field `target` at line 1 column 7'));
    expect(lookupError('"x"')).toEqual(
      e500('invalid type: string "x", expected internally tagged enum InvocationTargetRequest at line 1 column 3'),
    );
    expect(lookupError('{"target":5}')).toEqual(
      e500('invalid type: integer `5`, expected variant identifier at line 1 column 11'),
    );
    expect(lookupError('{"target":"foo"}')).toEqual(
      e500(
        'unknown variant `foo`, expected one of `workflow`, `idempotentInvocation`, `invocation` at line 1 column 15',
      ),
    );
    expect(lookupError('{"target":"workflow","workflowName":"Signup","workflowKey":"u1"} x')).toEqual(
      e500('trailing characters at line 1 column 66'),
    );
    expect(lookupError('{"target":"workflow","workflowName":"Signup"}')).toEqual(e500('missing field `workflowKey`'));
    expect(lookupError('{"target":"workflow","workflowName":5,"workflowKey":"u1"}')).toEqual(
      e500('invalid type: integer `5`, expected a string'),
    );
    expect(lookupError('{"target":"workflow","workflowName":null,"workflowKey":"u1"}')).toEqual(
      e500('invalid type: null, expected a string'),
    );
    expect(errorOf(() => parseTargetBody(body('{"x":1}'), 'request')).message).toBe(
      'cannot read body: invalid request body: missing field `target` at line 1 column 7',
    );
  });

  it('refuses bad scopes and bad invocation ids with 400', () => {
    const scoped = (scope: string) =>
      lookupError(`{"target":"workflow","workflowName":"Signup","workflowKey":"u1","scope":${JSON.stringify(scope)}}`);
    expect(scoped('')).toEqual({ status: 400, message: 'bad scope value: value cannot be empty' });
    expect(scoped('a'.repeat(37))).toEqual({
      status: 400,
      message: 'bad scope value: value too long: 37 bytes (max 36)',
    });
    expect(scoped('a b')).toEqual({
      status: 400,
      message: 'bad scope value: value contains characters outside the allowed set [a-zA-Z0-9_.-]',
    });
    expect(lookupError('{"target":"invocation","invocationId":"inv_garbage"}')).toEqual({
      status: 400,
      message: "bad invocation id 'inv_garbage': unrecognized codec version",
    });
  });
});

describe('awakeable ids at the ingress', () => {
  it('accepts sign_1 and prom_1, and explains a bad one as restate does', () => {
    expect(parseAwakeableIdParam('sign_1gg1ruIHcguA29jyO16--lh6IXunSC8seAAAAEQ')).toMatchObject({
      kind: 'signal',
      index: 17,
    });
    expect(parseAwakeableIdParam('prom_1gg1ruIHcguA29jyO16--lh6IXunSC8seAAAAEQ')).toMatchObject({
      kind: 'legacy',
      index: 17,
    });
    const reason = (id: string) => errorOf(() => parseAwakeableIdParam(id));
    expect(reason('prom_garbage')).toEqual({
      status: 400,
      message: "bad awakeable id 'prom_garbage': unrecognized codec version",
    });
    // Each expectation below is what restate-server 1.7.12 answered.
    expect(reason('sign_garbage').message).toBe("bad awakeable id 'sign_garbage': unrecognized codec version");
    expect(reason('sign_1gg1ruIHcguA29jyO16--lh6IXunSC8seAAAAEQx').message).toBe(
      "bad awakeable id 'sign_1gg1ruIHcguA29jyO16--lh6IXunSC8seAAAAEQx': id doesn't match the expected type",
    );
    expect(reason('prom_1abc').message).toBe("bad awakeable id 'prom_1abc': bad length");
    expect(reason('prom_').message).toBe("bad awakeable id 'prom_': bad length");
    expect(reason('xyz_1').message).toBe("bad awakeable id 'xyz_1': unrecognized resource type: xyz");
    expect(reason('inv_1jkk5Pppv5gg4rUUUGXeguXJX8QbTqneVP').message).toBe(
      "bad awakeable id 'inv_1jkk5Pppv5gg4rUUUGXeguXJX8QbTqneVP': id doesn't match the expected type",
    );
    expect(reason('').message).toBe("bad awakeable id '': bad length");
  });
});
