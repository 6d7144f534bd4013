import { describe, expect, it } from 'vitest';
import {
  DISCOVERY_ACCEPT_HEADER,
  SUPPORTED_MANIFEST_VERSIONS,
  SUPPORTED_PROTOCOL_VERSIONS,
  invocationContentType,
  isSupportedManifestVersion,
  isSupportedProtocolVersion,
  manifestContentType,
  negotiateProtocolVersion,
  parseInvocationContentType,
  parseManifestContentType,
} from '../../../runtime/src/protocol/version.ts';

describe('protocol versions', () => {
  it('names invocation content types and parses them back', () => {
    expect(SUPPORTED_PROTOCOL_VERSIONS).toEqual([5, 6, 7]);
    expect(invocationContentType(7)).toBe('application/vnd.restate.invocation.v7');
    for (const v of SUPPORTED_PROTOCOL_VERSIONS) expect(parseInvocationContentType(invocationContentType(v))).toBe(v);
    expect(parseInvocationContentType('Application/VND.restate.invocation.v6; charset=utf-8')).toBe(6);
    expect(parseInvocationContentType('application/vnd.restate.invocation.v8')).toBe(8);
    expect(parseInvocationContentType('application/vnd.restate.invocation.v')).toBeUndefined();
    expect(parseInvocationContentType('application/vnd.restate.invocation.v7x')).toBeUndefined();
    expect(parseInvocationContentType('application/json')).toBeUndefined();
    expect(isSupportedProtocolVersion(4)).toBe(false);
    expect(isSupportedProtocolVersion(5)).toBe(true);
    expect(isSupportedProtocolVersion(8)).toBe(false);
  });

  it('negotiates the highest common version', () => {
    expect(negotiateProtocolVersion(5, 7)).toBe(7);
    expect(negotiateProtocolVersion(5, 7, 6)).toBe(6);
    expect(negotiateProtocolVersion(1, 5)).toBe(5);
    expect(negotiateProtocolVersion(6, 9)).toBe(7);
    expect(negotiateProtocolVersion(1, 4)).toBeUndefined();
    expect(negotiateProtocolVersion(8, 9)).toBeUndefined();
    expect(negotiateProtocolVersion(7, 6)).toBeUndefined();
  });
});

describe('manifest versions', () => {
  it('builds the discovery Accept header exactly as restate-server sends it', () => {
    expect(DISCOVERY_ACCEPT_HEADER).toBe(
      'application/vnd.restate.endpointmanifest.v1+json, application/vnd.restate.endpointmanifest.v2+json, ' +
        'application/vnd.restate.endpointmanifest.v3+json, application/vnd.restate.endpointmanifest.v4+json',
    );
  });

  it('parses manifest content types', () => {
    expect(SUPPORTED_MANIFEST_VERSIONS).toEqual([2, 3, 4]);
    expect(manifestContentType(4)).toBe('application/vnd.restate.endpointmanifest.v4+json');
    expect(parseManifestContentType('application/vnd.restate.endpointmanifest.v4+json')).toBe(4);
    expect(parseManifestContentType(' application/vnd.restate.endpointmanifest.v3+json ; q=1')).toBe(3);
    expect(parseManifestContentType('application/vnd.restate.endpointmanifest.v4')).toBeUndefined();
    expect(parseManifestContentType('application/json')).toBeUndefined();
    expect(isSupportedManifestVersion(1)).toBe(false);
    expect(isSupportedManifestVersion(4)).toBe(true);
  });
});
