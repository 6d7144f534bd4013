/**
 * A consumer failure as the user should read it: kafkajs's error chain (retries wrap the cause) unwrapped to the
 * first error that says something, and the Kafka error codes a user can act on turned into what to change.
 */
export function explainKafkaError(err: unknown, topic: string, groupId: string): string {
  const chain: unknown[] = [];
  for (let e: unknown = err; e !== undefined && e !== null && chain.length < 8;) {
    chain.push(e);
    e = (e as { cause?: unknown }).cause;
  }
  for (const e of chain) {
    const type = (e as { type?: unknown }).type;
    const hint = typeof type === 'string' ? HINTS[type]?.(topic, groupId) : undefined;
    if (hint !== undefined) return `${hint} (${messageOf(e)})`;
    if ((e as { name?: unknown }).name === 'KafkaJSSASLAuthenticationError') {
      return `the brokers refused the SASL credentials: check sasl.username, sasl.password and sasl.mechanism (${messageOf(e)})`;
    }
    if ((e as { name?: unknown }).name === 'KafkaJSServerDoesNotSupportApiKey') {
      return `the brokers do not support a request the client needs (is security.protocol / sasl.mechanism what they expect?) (${messageOf(e)})`;
    }
  }
  const messages = [...new Set(chain.map(messageOf).filter((m) => m !== ''))];
  return messages.join(': ') || String(err);
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : typeof e === 'string' ? e : '';
}

const HINTS: Record<string, (topic: string, groupId: string) => string> = {
  UNKNOWN_TOPIC_OR_PARTITION: (topic) =>
    `topic '${topic}' does not exist on the Kafka cluster: create it (Ratchet does not create topics)`,
  TOPIC_AUTHORIZATION_FAILED: (topic) =>
    `the Kafka user may not read topic '${topic}': grant it Read and Describe on the topic`,
  GROUP_AUTHORIZATION_FAILED: (_topic, groupId) =>
    `the Kafka user may not use consumer group '${groupId}': grant it Read on the group, or set group.id`,
  SASL_AUTHENTICATION_FAILED: () =>
    'the brokers refused the SASL credentials: check sasl.username, sasl.password and sasl.mechanism',
  UNSUPPORTED_SASL_MECHANISM: () =>
    'the brokers do not offer this SASL mechanism: set sasl.mechanism to one they enable',
  ILLEGAL_SASL_STATE: () => 'the brokers did not expect SASL here: check security.protocol',
  INVALID_SESSION_TIMEOUT: () =>
    "session.timeout.ms is outside the brokers' group.min/max.session.timeout.ms: choose a value between them",
};
