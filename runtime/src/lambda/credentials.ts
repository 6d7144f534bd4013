import { AssumeRoleCommand, STSClient } from '@aws-sdk/client-sts';
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import type { Logger } from 'pino';

/**
 * The credentials Lambda calls are signed with.
 *
 * - Without a role: the AWS SDK's default provider chain (environment, web identity token for IRSA and EKS pod
 *   identity, container credentials, shared config, instance metadata), shared by every client of this process.
 * - With `assume_role_arn`: STS AssumeRole, called with those base credentials, with `ExternalId` = the cluster name
 *   (specification 4.7: the customer's trust policy checks it) and a session name naming the cluster. The temporary
 *   credentials are cached per role and refreshed before they expire; concurrent callers share one STS call.
 *
 * STS is called in the function's region (its regional endpoint; `AWS_ENDPOINT_URL_STS` overrides it, as the SDK
 * reads it). Secrets never reach a log line: errors carry the role, the STS error code and its message only.
 */

/** What the AWS SDK signs with (its `AwsCredentialIdentity`). */
export interface AwsCredentialIdentity {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
}
export type AwsCredentialIdentityProvider = () => Promise<AwsCredentialIdentity>;

/** AssumeRole's default session length; the shortest AWS allows is 15 minutes. */
const SESSION_SECONDS = 3600;
/** Refresh this long before expiry (or at half the lifetime when credentials live shorter than twice this). */
const REFRESH_BEFORE_MS = 5 * 60_000;

/** STS refused or could not be reached: the role could not be assumed. */
export class AssumeRoleError extends Error {
  constructor(
    readonly roleArn: string,
    /** The AWS error code (`AccessDenied`, `InvalidClientTokenId`, …), or the network error's. */
    readonly awsCode: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(`could not assume the role '${roleArn}' (STS ${awsCode}): ${message}`, options);
    this.name = 'AssumeRoleError';
  }
}

/** `ratchet-<cluster>`, reduced to what STS accepts in a session name ([\w+=,.@-], 2 to 64 characters). */
export function roleSessionName(clusterName: string): string {
  return `ratchet-${clusterName}`.replace(/[^\w+=,.@-]/g, '-').slice(0, 64);
}

interface Cached {
  credentials: AwsCredentialIdentity;
  /** When to fetch new ones. */
  refreshAt: number;
}

export interface CredentialsOptions {
  clusterName: string;
  logger: Logger;
  /** The base credentials; the default provider chain when absent. */
  base?: AwsCredentialIdentityProvider;
  now?: () => number;
}

export class LambdaCredentials {
  readonly base: AwsCredentialIdentityProvider;
  private readonly cache = new Map<string, Cached>();
  private readonly inflight = new Map<string, Promise<AwsCredentialIdentity>>();
  private readonly sts = new Map<string, STSClient>();
  private readonly now: () => number;

  constructor(private readonly options: CredentialsOptions) {
    this.base = options.base ?? defaultProvider();
    this.now = options.now ?? Date.now;
  }

  /** The provider a Lambda client of this role signs with (the base chain without a role). */
  provider(roleArn: string | undefined, region: string): AwsCredentialIdentityProvider {
    if (roleArn === undefined) return this.base;
    return () => this.assumed(roleArn, region);
  }

  /** The role's cached credentials, or new ones from STS when there are none or they are about to expire. */
  async assumed(roleArn: string, region: string): Promise<AwsCredentialIdentity> {
    const cached = this.cache.get(roleArn);
    if (cached !== undefined && this.now() < cached.refreshAt) return cached.credentials;
    const running = this.inflight.get(roleArn);
    if (running !== undefined) return running;
    const call = this.assume(roleArn, region).finally(() => this.inflight.delete(roleArn));
    this.inflight.set(roleArn, call);
    return call;
  }

  private async assume(roleArn: string, region: string): Promise<AwsCredentialIdentity> {
    const sessionName = roleSessionName(this.options.clusterName);
    let out;
    try {
      out = await this.stsClient(region).send(
        new AssumeRoleCommand({
          RoleArn: roleArn,
          RoleSessionName: sessionName,
          ExternalId: this.options.clusterName,
          DurationSeconds: SESSION_SECONDS,
        }),
      );
    } catch (err) {
      const e = err as Error & { code?: string };
      throw new AssumeRoleError(roleArn, e.name !== 'Error' ? e.name : (e.code ?? 'Error'), e.message, {
        cause: err,
      });
    }
    const c = out.Credentials;
    if (c?.AccessKeyId === undefined || c.SecretAccessKey === undefined) {
      throw new AssumeRoleError(roleArn, 'MalformedResponse', 'STS answered without credentials');
    }
    const credentials: AwsCredentialIdentity = {
      accessKeyId: c.AccessKeyId,
      secretAccessKey: c.SecretAccessKey,
      ...(c.SessionToken === undefined ? {} : { sessionToken: c.SessionToken }),
      ...(c.Expiration === undefined ? {} : { expiration: c.Expiration }),
    };
    const now = this.now();
    const expires = c.Expiration?.getTime() ?? now + SESSION_SECONDS * 1000;
    const lifetime = Math.max(0, expires - now);
    const refreshAt = expires - Math.min(REFRESH_BEFORE_MS, lifetime / 2);
    this.cache.set(roleArn, { credentials, refreshAt });
    this.options.logger.info(
      {
        roleArn,
        externalId: this.options.clusterName,
        sessionName,
        expiration: c.Expiration?.toISOString(),
      },
      'assumed the role for Lambda invocations',
    );
    return credentials;
  }

  private stsClient(region: string): STSClient {
    let client = this.sts.get(region);
    if (client === undefined) {
      client = new STSClient({ region, credentials: this.base, maxAttempts: 3 });
      this.sts.set(region, client);
    }
    return client;
  }

  close(): void {
    for (const c of this.sts.values()) c.destroy();
    this.sts.clear();
    this.cache.clear();
  }
}
