import { describe, expect, it } from 'vitest';
import { loadConfig, OperatorConfigError } from '../../../../operator/src/config.ts';

// The process configuration lives beside the runtime pieces it configures (queue, informers, leader election).

function load(env: Record<string, string>, namespaceFile?: string) {
  return loadConfig({ env, readNamespaceFile: () => namespaceFile, hostname: () => 'host-1' });
}

describe('operator config', () => {
  it('has defaults for everything', () => {
    expect(load({})).toEqual({
      namespace: 'default',
      watchNamespaces: [],
      leaderElection: {
        enabled: true,
        leaseName: 'ratchet-operator-leader',
        leaseDurationMs: 15_000,
        renewDeadlineMs: 10_000,
        retryPeriodMs: 2_000,
      },
      health: { host: '0.0.0.0', port: 8081 },
      resyncPeriodMs: 300_000,
      maxConcurrentReconciles: 4,
      clusterDomain: 'cluster.local',
      logLevel: 'info',
      logFormat: 'json',
      podName: 'host-1',
    });
    expect(load({}, 'ratchet-system').namespace).toBe('ratchet-system');
  });

  it('reads every variable', () => {
    const config = load({
      RATCHET_OPERATOR_NAMESPACE: 'ops',
      RATCHET_OPERATOR_WATCH_NAMESPACES: 'team-a, team-b,,team-a',
      RATCHET_OPERATOR_LEADER_ELECTION: 'false',
      RATCHET_OPERATOR_LEASE_NAME: 'my-lease',
      RATCHET_OPERATOR_HEALTH_BIND: '[::1]:9000',
      RATCHET_OPERATOR_RESYNC_PERIOD: '1h30m',
      RATCHET_OPERATOR_MAX_CONCURRENT_RECONCILES: '8',
      RATCHET_OPERATOR_CLUSTER_DOMAIN: 'corp.example.',
      RATCHET_OPERATOR_LOG_LEVEL: 'DEBUG',
      RATCHET_OPERATOR_LOG_FORMAT: 'json',
      RATCHET_OPERATOR_LEASE_DURATION: '30s',
      RATCHET_OPERATOR_RENEW_DEADLINE: '20s',
      RATCHET_OPERATOR_RETRY_PERIOD: '5s',
      POD_NAME: 'ratchet-operator-5f7d-abcde',
    });
    expect(config).toEqual({
      namespace: 'ops',
      watchNamespaces: ['team-a', 'team-b'],
      leaderElection: {
        enabled: false,
        leaseName: 'my-lease',
        leaseDurationMs: 30_000,
        renewDeadlineMs: 20_000,
        retryPeriodMs: 5_000,
      },
      health: { host: '::1', port: 9000 },
      resyncPeriodMs: 5_400_000,
      maxConcurrentReconciles: 8,
      clusterDomain: 'corp.example',
      logLevel: 'debug',
      logFormat: 'json',
      podName: 'ratchet-operator-5f7d-abcde',
    });
    expect(Object.isFrozen(config)).toBe(true);
    expect(load({ RATCHET_OPERATOR_HEALTH_BIND: ':8081' }).health).toEqual({ host: '0.0.0.0', port: 8081 });
  });

  it.each([
    ['RATCHET_OPERATOR_LEADER_ELECTION', 'yes'],
    ['RATCHET_OPERATOR_RESYNC_PERIOD', '5'],
    ['RATCHET_OPERATOR_RESYNC_PERIOD', '100ms'],
    ['RATCHET_OPERATOR_MAX_CONCURRENT_RECONCILES', '0'],
    ['RATCHET_OPERATOR_MAX_CONCURRENT_RECONCILES', '2.5'],
    ['RATCHET_OPERATOR_HEALTH_BIND', '8081'],
    ['RATCHET_OPERATOR_HEALTH_BIND', 'localhost:70000'],
    ['RATCHET_OPERATOR_LOG_LEVEL', 'verbose'],
    ['RATCHET_OPERATOR_NAMESPACE', 'Bad_Namespace'],
    ['RATCHET_OPERATOR_WATCH_NAMESPACES', 'NOT-OK'],
    ['RATCHET_OPERATOR_LEASE_NAME', 'no spaces'],
    ['RATCHET_OPERATOR_CLUSTER_DOMAIN', 'under_score'],
    ['RATCHET_OPERATOR_LOG_FORMAT', 'text'],
    ['RATCHET_OPERATOR_LEASE_DURATION', 'soon'],
  ])('rejects %s=%s naming the variable', (variable, value) => {
    let error: unknown;
    try {
      load({ [variable]: value });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(OperatorConfigError);
    expect((error as OperatorConfigError).variable).toBe(variable);
    expect((error as Error).message).toContain(variable);
    expect((error as Error).message).toContain(value);
  });

  it('refuses lease timings that could let two leaders overlap', () => {
    expect(() => load({ RATCHET_OPERATOR_RENEW_DEADLINE: '15s' })).toThrow(
      /RATCHET_OPERATOR_RENEW_DEADLINE: must be shorter/,
    );
    expect(() => load({ RATCHET_OPERATOR_RETRY_PERIOD: '10s' })).toThrow(
      /RATCHET_OPERATOR_RETRY_PERIOD: must be shorter/,
    );
  });
});
