import { describe, expect, it } from 'vitest';
import { InvalidRequestFieldError } from '../../../runtime/src/errors/errors.ts';
import { checkRoleArn, parseFunctionArn } from '../../../runtime/src/lambda/arn.ts';

// The refusals of a function ARN are restate-server's (`LambdaARN::from_str`) word for word and in its order of
// checks; Ratchet's own come after them, for what AWS would refuse anyway.

const MISSING_QUALIFIER =
  "A qualified ARN needs a version or alias suffix. If you want to use the unpublished version, provide $LATEST and make sure your shell doesn't treat it as a variable";
const EIGHT_COMPONENTS = 'A qualified ARN must have 8 components delimited by `:`';
const PREFIX = 'First component of the ARN must be `arn`';
const SERVICE = 'ARN must be for the lambda service';
const RESOURCE = 'ARN must refer to a `function` resource';
const EMPTY = 'Partition, service, region, account ID, function name and version must all be non-empty';

/** The reason of the 400 `parseFunctionArn` refuses `arn` with. */
function refusal(arn: string): string {
  try {
    parseFunctionArn(arn);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidRequestFieldError);
    const e = err as InvalidRequestFieldError;
    expect(e.status).toBe(400);
    expect(e.code).toBeUndefined();
    const prefix = "The request field 'arn' is invalid. Reason: ";
    expect(e.message.startsWith(prefix), e.message).toBe(true);
    return e.message.slice(prefix.length);
  }
  throw new Error(`'${arn}' was accepted`);
}

describe('parseFunctionArn', () => {
  it('parses a qualified ARN with a version, an alias or $LATEST', () => {
    expect(parseFunctionArn('arn:aws:lambda:eu-central-1:123456789012:function:greeter:7')).toEqual({
      arn: 'arn:aws:lambda:eu-central-1:123456789012:function:greeter:7',
      partition: 'aws',
      region: 'eu-central-1',
      accountId: '123456789012',
      functionName: 'greeter',
      qualifier: '7',
    });
    expect(parseFunctionArn('arn:aws-cn:lambda:cn-north-1:123456789012:function:my_fn-2:live')).toMatchObject({
      partition: 'aws-cn',
      region: 'cn-north-1',
      functionName: 'my_fn-2',
      qualifier: 'live',
    });
    expect(parseFunctionArn('arn:aws:lambda:us-east-1:123456789012:function:f:$LATEST').qualifier).toBe('$LATEST');
  });

  it("refuses an unqualified ARN with restate's hint about $LATEST", () => {
    expect(refusal('arn:aws:lambda:eu-central-1:123456789012:function:greeter')).toBe(MISSING_QUALIFIER);
    // An empty qualifier (`$LATEST` eaten by the shell) is the same mistake.
    expect(refusal('arn:aws:lambda:eu-central-1:123456789012:function:greeter:')).toBe(MISSING_QUALIFIER);
  });

  it('refuses fewer than 7 components as not having 8', () => {
    expect(refusal('greeter')).toBe(EIGHT_COMPONENTS);
    expect(refusal('')).toBe(EIGHT_COMPONENTS);
    expect(refusal('arn:aws:lambda:eu-central-1:123456789012:greeter')).toBe(EIGHT_COMPONENTS);
  });

  it('refuses a wrong prefix, service or resource type', () => {
    expect(refusal('urn:aws:lambda:eu-central-1:123456789012:function:greeter:1')).toBe(PREFIX);
    expect(refusal('arn:aws:s3:eu-central-1:123456789012:function:greeter:1')).toBe(SERVICE);
    expect(refusal('arn:aws:lambda:eu-central-1:123456789012:layer:greeter:1')).toBe(RESOURCE);
  });

  it('refuses empty partition, region, account id or function name', () => {
    expect(refusal('arn::lambda:eu-central-1:123456789012:function:greeter:1')).toBe(EMPTY);
    expect(refusal('arn:aws:lambda::123456789012:function:greeter:1')).toBe(EMPTY);
    expect(refusal('arn:aws:lambda:eu-central-1::function:greeter:1')).toBe(EMPTY);
    expect(refusal('arn:aws:lambda:eu-central-1:123456789012:function::1')).toBe(EMPTY);
  });

  it("checks in restate's order when an ARN has several faults", () => {
    // Seven components are a missing suffix whatever they are (restate reads the version last).
    expect(refusal('urn:aws:s3:eu-central-1:123456789012:bucket:greeter')).toBe(MISSING_QUALIFIER);
    expect(refusal('urn:aws:s3:eu-central-1:123456789012:bucket:greeter:1')).toBe(PREFIX);
    // The resource type before the service.
    expect(refusal('arn:aws:s3:eu-central-1:123456789012:bucket:greeter:1')).toBe(RESOURCE);
    // Empty components before an empty version.
    expect(refusal('arn::lambda:eu-central-1:123456789012:function:greeter:')).toBe(EMPTY);
    // restate's checks before Ratchet's own.
    expect(refusal('arn:aws:s3:eu-central-1:12345:function:greeter:1')).toBe(SERVICE);
  });

  it("refuses with Ratchet's own reason what AWS would refuse: account id, function name, qualifier", () => {
    expect(refusal('arn:aws:lambda:eu-central-1:12345:function:greeter:1')).toBe(
      "the account ID '12345' is not an AWS account ID (12 digits)",
    );
    expect(refusal('arn:aws:lambda:eu-central-1:12345678901a:function:greeter:1')).toContain(
      "the account ID '12345678901a'",
    );
    expect(refusal('arn:aws:lambda:eu-central-1:123456789012:function:greet.er:1')).toBe(
      "the function name 'greet.er' is not a Lambda function name (letters, digits, '-' and '_', at most 64)",
    );
    expect(refusal(`arn:aws:lambda:eu-central-1:123456789012:function:${'f'.repeat(65)}:1`)).toContain(
      'is not a Lambda function name',
    );
    const qualifierReason = (q: string): string =>
      `the qualifier '${q}' is neither a version number, $LATEST nor an alias name (letters, digits, '-' and '_'): ` +
      'a qualified ARN ends with exactly one of them';
    // A ninth component is part of the qualifier, as restate reads it, and no qualifier has a `:`.
    expect(refusal('arn:aws:lambda:eu-central-1:123456789012:function:greeter:1:live')).toBe(qualifierReason('1:live'));
    expect(refusal('arn:aws:lambda:eu-central-1:123456789012:function:greeter:$latest')).toBe(
      qualifierReason('$latest'),
    );
    expect(refusal('arn:aws:lambda:eu-central-1:123456789012:function:greeter:v.1')).toBe(qualifierReason('v.1'));
  });
});

describe('checkRoleArn', () => {
  it('accepts IAM role ARNs, with a path, in every partition', () => {
    for (const arn of [
      'arn:aws:iam::123456789012:role/ratchet-invoker',
      'arn:aws:iam::123456789012:role/service-role/ratchet+lambda=1,x.y@z',
      'arn:aws-cn:iam::123456789012:role/r',
      'arn:aws-us-gov:iam::123456789012:role/r',
    ]) {
      expect(checkRoleArn(arn)).toBe(arn);
    }
  });

  it('refuses what is not an IAM role ARN, naming assume_role_arn', () => {
    for (const arn of [
      'ratchet-invoker',
      'arn:aws:iam::123456789012:user/alice',
      'arn:aws:iam::12345:role/r',
      'arn:aws:sts::123456789012:assumed-role/r/s',
      'arn:aws:iam:eu-central-1:123456789012:role/r',
      'arn:aws:iam::123456789012:role/',
      'arn:aws:iam::123456789012:role/has space',
    ]) {
      let err: unknown;
      try {
        checkRoleArn(arn);
      } catch (e) {
        err = e;
      }
      expect(err, arn).toBeInstanceOf(InvalidRequestFieldError);
      const e = err as InvalidRequestFieldError;
      expect(e.status).toBe(400);
      expect(e.message).toBe(
        `The request field 'assume_role_arn' is invalid. Reason: '${arn}' is not an IAM role ARN; expected ` +
          'arn:aws:iam::<12-digit account id>:role/<role name>, the role in your account whose trust policy lets ' +
          'this cluster assume it with the cluster name as external id',
      );
    }
  });
});
