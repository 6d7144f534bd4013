import type { RegisterDeploymentRequest } from '../../admin-client/types.ts';
import type { ReconcileContext } from '../../reconcile/types.ts';
import { stableHash } from '../shared/hash.ts';
import { readSecretKey } from '../shared/secrets.ts';
import type { DeploymentObject } from '../shared/objects.ts';

/*
 * What a Deployment resource asks to register: the endpoint's identity (a URI or a Lambda ARN — a change of it is a
 * new registration) and what can be changed in place with PATCH (headers, the role to assume, HTTP/1.1). `metadata`,
 * `registration.breaking` and `registration.force` go with a registration only: the admin API cannot change them in
 * place, and re-registering the same endpoint with force to apply them would rewrite the schema under invocations
 * still running on it. They take effect with the next new registration (a new endpoint).
 */

export interface ResolvedEndpoint {
  /** Identity of the registration: the URI or the ARN. */
  readonly endpoint: string;
  /** The registration request; `force` is decided per call, not here. */
  readonly request: RegisterDeploymentRequest;
  readonly headers: Record<string, string>;
  readonly assumeRoleArn: string | undefined;
  /** HTTP endpoints: whether to talk HTTP/1.1 (undefined for Lambda). */
  readonly useHttp11: boolean | undefined;
  /** Digest of what PATCH can change; kept in status.headersHash. */
  readonly headersHash: string;
}

export type EndpointResolution =
  | { readonly ok: true; readonly value: ResolvedEndpoint }
  | { readonly ok: false; readonly reason: 'SecretNotFound' | 'InvalidSpec'; readonly message: string };

/** `<base><path>`, with exactly one `/` between them. */
function joinPath(base: string, path: string | undefined): string {
  if (path === undefined || path === '' || path === '/') return base;
  return `${base.replace(/\/+$/, '')}/${path.replace(/^\/+/, '')}`;
}

export function headersHash(
  headers: Record<string, string>,
  assumeRoleArn: string | undefined,
  useHttp11 = false,
): string {
  // `useHttp11` joins the digest only when set, so the hashes recorded before it was part of it stay valid.
  return stableHash({ headers, assumeRoleArn: assumeRoleArn ?? null, ...(useHttp11 ? { useHttp11 } : {}) });
}

export async function resolveEndpoint(ctx: ReconcileContext, dep: DeploymentObject): Promise<EndpointResolution> {
  const namespace = dep.metadata.namespace ?? 'default';
  const spec = dep.spec;

  const headers: Record<string, string> = {};
  const missing: string[] = [];
  for (const h of spec.additionalHeaders ?? []) {
    if (h.value !== undefined) {
      headers[h.name] = h.value;
      continue;
    }
    const ref = h.valueFrom?.secretKeyRef;
    if (ref === undefined) continue;
    const value = await readSecretKey(ctx.kube, namespace, ref.name, ref.key);
    if (value.found) headers[h.name] = value.value;
    else missing.push(`header ${h.name}: ${value.message}`);
  }
  if (missing.length > 0) return { ok: false, reason: 'SecretNotFound', message: missing.join('; ') };

  const flags = {
    ...(Object.keys(headers).length === 0 ? {} : { additional_headers: headers }),
    breaking: spec.registration?.breaking ?? false,
    ...(spec.metadata === undefined ? {} : { metadata: spec.metadata }),
  };

  const lambda = spec.endpoint.lambda;
  if (lambda !== undefined) {
    const assumeRoleArn = lambda.assumeRoleArn;
    return {
      ok: true,
      value: {
        endpoint: lambda.arn,
        request: {
          arn: lambda.arn,
          ...(assumeRoleArn === undefined ? {} : { assume_role_arn: assumeRoleArn }),
          ...flags,
        },
        headers,
        assumeRoleArn,
        useHttp11: undefined,
        headersHash: headersHash(headers, assumeRoleArn),
      },
    };
  }

  const http = spec.endpoint.http;
  let uri: string;
  if (http?.uri !== undefined) {
    uri = http.uri;
  } else if (http?.serviceRef !== undefined) {
    const ref = http.serviceRef;
    uri = joinPath(ctx.serviceUrl(namespace, ref.name, ref.port, ref.scheme ?? 'http'), ref.path);
  } else {
    // The CRD's CEL rules (exactly one endpoint kind, exactly one of uri and serviceRef) keep this from happening.
    return {
      ok: false,
      reason: 'InvalidSpec',
      message: 'spec.endpoint names neither a uri, a serviceRef nor a lambda',
    };
  }
  const useHttp11 = http.useHttp11 ?? false;
  return {
    ok: true,
    value: {
      endpoint: uri,
      request: { uri, use_http_11: useHttp11, ...flags },
      headers,
      assumeRoleArn: undefined,
      useHttp11,
      headersHash: headersHash(headers, undefined, useHttp11),
    },
  };
}
