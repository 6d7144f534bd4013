import {
  KafkaJSConnectionError,
  KafkaJSNumberOfRetriesExceeded,
  KafkaJSProtocolError,
  KafkaJSSASLAuthenticationError,
  KafkaJSServerDoesNotSupportApiKey,
} from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { explainKafkaError } from '../../../runtime/src/kafka/errors.ts';

/** kafkajs's own error classes, as its retries wrap them, turned into what a user should change. */

const protocolError = (type: string, message: string): KafkaJSProtocolError =>
  new KafkaJSProtocolError({ message, type, code: 0, retriable: false } as unknown as string);

const afterRetries = (cause: Error): Error =>
  new KafkaJSNumberOfRetriesExceeded(cause, { retryCount: 5, retryTime: 1000 });

describe('explainKafkaError', () => {
  it('names a missing topic, also under the retries that wrap it', () => {
    const err = afterRetries(
      protocolError('UNKNOWN_TOPIC_OR_PARTITION', 'This server does not host this topic-partition'),
    );
    const text = explainKafkaError(err, 'orders', 'g1');
    expect(text).toContain("topic 'orders' does not exist on the Kafka cluster");
    expect(text).toContain('This server does not host this topic-partition');
  });

  it('says which ACL is missing for the topic and for the group', () => {
    expect(explainKafkaError(protocolError('TOPIC_AUTHORIZATION_FAILED', 'nope'), 'orders', 'g1')).toContain(
      "may not read topic 'orders'",
    );
    expect(explainKafkaError(protocolError('GROUP_AUTHORIZATION_FAILED', 'nope'), 'orders', 'g1')).toContain(
      "may not use consumer group 'g1'",
    );
  });

  it('points at the SASL settings when the brokers refuse the credentials', () => {
    expect(explainKafkaError(protocolError('SASL_AUTHENTICATION_FAILED', 'bad'), 't', 'g')).toContain(
      'sasl.username, sasl.password',
    );
    // kafkajs's typings declare no constructor arguments; its class takes the message like its other errors.
    const SaslError = KafkaJSSASLAuthenticationError as unknown as new (message: string) => Error;
    const sasl = new SaslError('SASL SCRAM SHA256 authentication failed');
    expect(explainKafkaError(afterRetries(sasl), 't', 'g')).toContain('refused the SASL credentials');
    const unsupported = new KafkaJSServerDoesNotSupportApiKey(
      'The Kafka server does not support the requested API version',
    );
    expect(explainKafkaError(unsupported, 't', 'g')).toContain('security.protocol / sasl.mechanism');
  });

  it('keeps the message of an error it has no hint for, with its causes once each', () => {
    const refused = new KafkaJSConnectionError('Connection error: connect ECONNREFUSED 127.0.0.1:9');
    expect(explainKafkaError(afterRetries(refused), 't', 'g')).toBe(
      'Connection error: connect ECONNREFUSED 127.0.0.1:9',
    );
    expect(explainKafkaError('plain text', 't', 'g')).toBe('plain text');
    expect(explainKafkaError(new Error('outer', { cause: new Error('inner') }), 't', 'g')).toBe('outer: inner');
  });
});
