import { describe, expect, it } from 'vitest';

import { IngressError } from '../../../runtime/src/ingress/errors.ts';
import { normalizePath, parseIngressPath, utf8Error, type ServiceLookup } from '../../../runtime/src/ingress/path.ts';
import type { ActiveService, HandlerSchema, ServiceType } from '../../../runtime/src/schema/types.ts';

function handler(name: string): HandlerSchema {
  return { name, input: { required: false }, output: { setContentTypeIfEmpty: false }, retryPolicy: {} };
}

function service(name: string, ty: ServiceType, handlers: string[]): ActiveService {
  return {
    schema: { name, ty, handlers: handlers.map(handler), retryPolicy: {} },
    revision: 1,
    deploymentId: 'dp_13o2BJB8AzAA9KIwPxc6xX3',
    overrides: {},
  };
}

const SERVICES = new Map(
  [
    service('Greeter', 'Service', ['greet']),
    service('Counter', 'VirtualObject', ['add']),
    service('Signup', 'Workflow', ['run', 'status']),
  ].map((s) => [s.schema.name, s]),
);
const registry: ServiceLookup = { service: (name) => SERVICES.get(name) };

const ID = 'inv_1arJqkEd7c2K5D6QZl1EpZ9Swb2nQWoDR4';
const BAD_SERVICE_PATH = 'bad path, expected either /:service-name/:handler or /:object-name/:object-key/:handler';
const BAD_API_PATH =
  'bad path, expected /restate/call/:service/:handler, /restate/send/:service/:handler, /restate/scope/:scope/call/:service/:handler, /restate/attach/:invocation_id, /restate/output/:invocation_id, or /restate/lookup';
const BAD_INVOCATION_PATH =
  'bad path, expected either /restate/invocation/:invocation_id/output or /restate/invocation/:invocation_id/attach or /restate/invocation/:invocation_target/:idempotency_key/output or /restate/invocation/:invocation_target/:idempotency_key/attach';
const BAD_WORKFLOW_PATH =
  'bad path, expected either /restate/workflow/:workflow_name/:workflow_key/output or /restate/workflow/:workflow_name/:workflow_key/attach';
const BAD_AWAKEABLES_PATH =
  'bad path, expected either /restate/awakeables/:id/resolve or /restate/awakeables/:id/reject';

const parse = (path: string) => parseIngressPath(path, registry);

function errorOf(path: string): { status: number; message: string } {
  try {
    parse(path);
  } catch (err) {
    expect(err).toBeInstanceOf(IngressError);
    return { status: (err as IngressError).status, message: (err as IngressError).message };
  }
  throw new Error(`${path} parsed`);
}

describe('ingress paths: service calls', () => {
  it('takes a key segment only for keyed services, URL-decoded like restate (invalid escapes stay)', () => {
    expect(parse('/Greeter/greet')).toMatchObject({ kind: 'invoke', key: undefined, send: false, scope: undefined });
    expect(parse('/Counter/k%2F1%20x/add/send')).toMatchObject({ kind: 'invoke', key: 'k/1 x', send: true });
    expect(parse('/Counter/k%zz+1/add')).toMatchObject({ key: 'k%zz+1' });
    expect(parse('/restate/send/Signup/u%C3%A9/run')).toMatchObject({ key: 'ué', send: true });
    expect(parse('/restate/scope/t%2D1/call/Greeter/greet')).toMatchObject({ scope: 't-1', send: false });
  });

  it('rejects wrong shapes with restate status and wording', () => {
    expect(errorOf('/Counter/add')).toEqual({ status: 400, message: BAD_SERVICE_PATH });
    expect(errorOf('/Greeter/x/greet')).toEqual({ status: 400, message: BAD_SERVICE_PATH });
    expect(errorOf('/Greeter/greet/send/x')).toEqual({ status: 400, message: BAD_SERVICE_PATH });
    expect(errorOf('/restate/call/Greeter')).toEqual({ status: 400, message: BAD_API_PATH });
    expect(errorOf('/restate/call/Greeter/greet/x')).toEqual({ status: 400, message: BAD_API_PATH });
    expect(errorOf('/restate/scope/s/foo/Greeter/greet')).toEqual({ status: 400, message: BAD_API_PATH });
    expect(errorOf('/')).toEqual({ status: 400, message: 'bad path: /' });
    expect(errorOf('/a/b/c/d/e/f/g/h')).toEqual({ status: 400, message: 'bad path: /a/b/c/d/e/f/g/h' });
    expect(errorOf('/Nope/x')).toEqual({
      status: 404,
      message: "service 'Nope' not found, make sure to register the service before calling it.",
    });
    expect(errorOf('/Greeter/nope').status).toBe(404);
    expect(errorOf('/restate/foo')).toEqual({ status: 404, message: 'not found' });
  });

  it('renders a key that is not UTF-8 as Rust prints the FromUtf8Error', () => {
    expect(errorOf('/Counter/k%FF/add')).toEqual({
      status: 400,
      message:
        'bad path, cannot decode key: FromUtf8Error { bytes: [107, 255], error: Utf8Error { valid_up_to: 1, error_len: Some(1) } }',
    });
    expect(errorOf('/restate/workflow/Signup/k%E2%82/output').message).toBe(
      'bad path, cannot decode key: FromUtf8Error { bytes: [107, 226, 130], error: Utf8Error { valid_up_to: 1, error_len: None } }',
    );
  });
});

describe('ingress paths: attach, output, lookup', () => {
  it('reads ids, idempotency targets (key only for keyed services, idempotency key not decoded) and workflows', () => {
    expect(parse(`/restate/invocation/${ID}/attach`)).toEqual({
      kind: 'attach',
      query: { kind: 'invocation', id: ID },
    });
    expect(parse(`/restate/output/${ID}`)).toEqual({ kind: 'output', query: { kind: 'invocation', id: ID } });
    expect(parse('/restate/invocation/Greeter/greet/a%20b/output')).toEqual({
      kind: 'output',
      query: { kind: 'idempotency', service: 'Greeter', key: undefined, handler: 'greet', idempotencyKey: 'a%20b' },
    });
    expect(parse('/restate/invocation/Counter/k%203/add/c-1/attach')).toEqual({
      kind: 'attach',
      query: { kind: 'idempotency', service: 'Counter', key: 'k 3', handler: 'add', idempotencyKey: 'c-1' },
    });
    expect(parse('/restate/workflow/Signup/u%2F1/attach')).toEqual({
      kind: 'attach',
      query: { kind: 'workflow', name: 'Signup', key: 'u/1' },
    });
    expect(parse('/restate/attach')).toEqual({ kind: 'attachByTarget' });
    expect(parse('/restate/output')).toEqual({ kind: 'outputByTarget' });
    expect(parse('/restate/lookup')).toEqual({ kind: 'lookup' });
  });

  it('gives malformed ids restate reasons, in restate order', () => {
    const reason = (id: string) => errorOf(`/restate/invocation/${id}/output`).message;
    expect(reason('inv_garbage')).toBe("bad invocation id 'inv_garbage': unrecognized codec version");
    expect(reason('dp_garbage')).toBe("bad invocation id 'dp_garbage': unrecognized codec version");
    expect(reason('dp_13o2BJB8AzAA9KIwPxc6xX3')).toBe(
      "bad invocation id 'dp_13o2BJB8AzAA9KIwPxc6xX3': id doesn't match the expected type",
    );
    expect(reason('inv_1abc')).toBe("bad invocation id 'inv_1abc': bad length");
    expect(reason('inv_')).toBe("bad invocation id 'inv_': bad length");
    expect(reason('nounderscore')).toBe("bad invocation id 'nounderscore': bad format");
    expect(reason('xyz_1')).toBe("bad invocation id 'xyz_1': unrecognized resource type: xyz");
    expect(errorOf('/restate/attach/inv_garbage')).toEqual({
      status: 400,
      message: "bad invocation id 'inv_garbage': unrecognized codec version",
    });
  });

  it('rejects wrong shapes with restate status and wording', () => {
    expect(errorOf('/restate/invocation/x')).toEqual({ status: 400, message: BAD_INVOCATION_PATH });
    expect(errorOf('/restate/invocation/Counter/k/add/output')).toEqual({ status: 400, message: BAD_INVOCATION_PATH });
    expect(errorOf(`/restate/invocation/${ID}/foo`)).toEqual({ status: 404, message: 'not found' });
    expect(errorOf('/restate/invocation/Greeter/greet/k/foo')).toEqual({ status: 404, message: 'not found' });
    expect(errorOf('/restate/invocation/Nope/a/b/output').status).toBe(404);
    expect(errorOf('/restate/workflow/Signup')).toEqual({ status: 400, message: BAD_WORKFLOW_PATH });
    expect(errorOf('/restate/workflow/Signup/u1/foo')).toEqual({ status: 404, message: 'not found' });
    expect(errorOf(`/restate/attach/${ID}/x`)).toEqual({ status: 400, message: BAD_API_PATH });
    expect(errorOf('/restate/lookup/x')).toEqual({ status: 400, message: BAD_API_PATH });
  });
});

describe('ingress paths: awakeables and the rest', () => {
  it('reads both prefixes and leaves the id to be checked after the method', () => {
    expect(parse('/restate/awakeables/prom_garbage/resolve')).toEqual({
      kind: 'awakeable',
      op: 'resolve',
      awakeableId: 'prom_garbage',
    });
    expect(parse('/restate/a/x/reject')).toEqual({ kind: 'awakeable', op: 'reject', awakeableId: 'x' });
    expect(errorOf('/restate/a/x/foo')).toEqual({ status: 404, message: 'not found' });
    expect(errorOf('/restate/a/x')).toEqual({ status: 400, message: BAD_AWAKEABLES_PATH });
    expect(errorOf('/restate/a')).toEqual({ status: 400, message: BAD_AWAKEABLES_PATH });
  });

  it('routes health and openapi', () => {
    expect(parse('/restate/health')).toEqual({ kind: 'health' });
    expect(parse('/openapi/x')).toEqual({ kind: 'openapi' });
  });
});

describe('normalizePath', () => {
  it('trims leading and trailing slashes as tower-http does in front of restate', () => {
    expect(normalizePath('/Greeter/greet')).toBe('/Greeter/greet');
    expect(normalizePath('/Greeter/greet/')).toBe('/Greeter/greet');
    expect(normalizePath('///Greeter/greet//')).toBe('/Greeter/greet');
    expect(normalizePath('/Counter//add')).toBe('/Counter//add');
    expect(normalizePath('/Greeter/')).toBe('/Greeter');
    expect(normalizePath('/')).toBe('/');
    expect(normalizePath('//')).toBe('/');
  });
});

describe('utf8Error', () => {
  it('reports the first invalid sequence as Rust does', () => {
    expect(utf8Error(Buffer.from('héllo €'))).toBeUndefined();
    expect(utf8Error(Uint8Array.from([0x61, 0xc0, 0x80]))).toEqual({ validUpTo: 1, errorLen: 1 });
    expect(utf8Error(Uint8Array.from([0xe0, 0x80, 0x80]))).toEqual({ validUpTo: 0, errorLen: 1 });
    expect(utf8Error(Uint8Array.from([0xe2, 0x82, 0x41]))).toEqual({ validUpTo: 0, errorLen: 2 });
    expect(utf8Error(Uint8Array.from([0xf0, 0x9f, 0x98, 0x41]))).toEqual({ validUpTo: 0, errorLen: 3 });
    expect(utf8Error(Uint8Array.from([0x41, 0xf0, 0x9f]))).toEqual({ validUpTo: 1, errorLen: undefined });
    expect(utf8Error(Uint8Array.from([0xed, 0xa0, 0x80]))).toEqual({ validUpTo: 0, errorLen: 1 });
  });
});
