import type { Cluster } from '../../api/v1alpha1/index.ts';
import type { ReconcileContext } from '../../reconcile/types.ts';
import { getSecret, rawValue, type Blocker } from './secrets.ts';

const TLS_KEYS = ['tls.crt', 'tls.key'] as const;

export type TlsResolution =
  /** Values of the key pair as stored, keyed `<secret>/<key>` for the pods' config hash (empty without TLS). */
  { readonly ok: true; readonly values: Record<string, string> } | { readonly ok: false; readonly blocker: Blocker };

/**
 * The introspection listener's key pair. A missing Secret or key is waited for, not Stalled: cert-manager creates
 * the Secret some time after the Certificate, and the watch on Secrets brings the Cluster back when it does.
 */
export async function resolveTls(cluster: Cluster, ctx: ReconcileContext): Promise<TlsResolution> {
  const ref = cluster.spec.tls?.introspection;
  if (ref === undefined) return { ok: true, values: {} };
  const secret = await getSecret(ctx, cluster, ref.name);
  if (secret === undefined) {
    return {
      ok: false,
      blocker: {
        reason: 'TLSSecretNotFound',
        message: `waiting for Secret ${ref.name} (spec.tls.introspection) with tls.crt and tls.key`,
        stalled: false,
      },
    };
  }
  const values: Record<string, string> = {};
  for (const key of TLS_KEYS) {
    const value = rawValue(secret, key);
    if (value === undefined || value === '') {
      return {
        ok: false,
        blocker: {
          reason: 'TLSSecretIncomplete',
          message: `Secret ${ref.name} (spec.tls.introspection) has no ${key}`,
          stalled: false,
        },
      };
    }
    values[`${ref.name}/${key}`] = value;
  }
  return { ok: true, values };
}
