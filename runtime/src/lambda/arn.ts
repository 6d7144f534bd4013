import { InvalidRequestFieldError } from '../errors/errors.ts';

/**
 * AWS ARNs a Lambda deployment is registered with: the function (`arn`), which must be qualified, and the role to
 * assume when invoking it (`assume_role_arn`). The messages of a refused function ARN are restate-server 1.7.12's,
 * word for word; Ratchet also refuses what AWS itself would refuse (an account id that is not 12 digits, a qualifier
 * with a `:` in it), where restate passes the ARN on and reports whatever Lambda answers.
 */

export interface FunctionArn {
  /** The ARN as given (it is the deployment's identity, as restate keeps it). */
  readonly arn: string;
  readonly partition: string;
  /** The region the function lives in: Lambda and STS are called there. */
  readonly region: string;
  readonly accountId: string;
  readonly functionName: string;
  /** The version (`1`), alias (`live`) or `$LATEST`. */
  readonly qualifier: string;
}

const ACCOUNT_ID = /^\d{12}$/;
/** AWS: function names are letters, digits, hyphens and underscores, at most 64 characters. */
const FUNCTION_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
/** A version number, `$LATEST`, or an alias (letters, digits, `-`, `_`, not only digits, at most 128 characters). */
const QUALIFIER = /^(\$LATEST|[0-9]+|[a-zA-Z0-9_-]{1,128})$/;
/** `arn:<partition>:iam::<account>:role/<path/><name>`. */
const ROLE_ARN = /^arn:(aws|aws-cn|aws-us-gov|aws-iso(-[a-z])?):iam::(\d{12}):role\/[\w+=,.@/-]{1,512}$/;

const MISSING_QUALIFIER =
  "A qualified ARN needs a version or alias suffix. If you want to use the unpublished version, provide $LATEST and make sure your shell doesn't treat it as a variable";

function invalid(reason: string): InvalidRequestFieldError {
  return new InvalidRequestFieldError('arn', reason);
}

/** Parses and checks a qualified function ARN (400 with restate's reason when it is not one). */
export function parseFunctionArn(arn: string): FunctionArn {
  // restate's order of checks (`LambdaARN::from_str`), so that an ARN with several faults gets restate's message.
  const parts = arn.split(':');
  if (parts.length < 7) throw invalid('A qualified ARN must have 8 components delimited by `:`');
  if (parts.length === 7) throw invalid(MISSING_QUALIFIER);
  const [prefix, partition, service, region, accountId, resourceType, functionName] = parts as [
    string,
    string,
    string,
    string,
    string,
    string,
    string,
  ];
  const qualifier = parts.slice(7).join(':');
  if (prefix !== 'arn') throw invalid('First component of the ARN must be `arn`');
  if (resourceType !== 'function') throw invalid('ARN must refer to a `function` resource');
  if (service !== 'lambda') throw invalid('ARN must be for the lambda service');
  if (partition === '' || region === '' || accountId === '' || functionName === '') {
    throw invalid('Partition, service, region, account ID, function name and version must all be non-empty');
  }
  if (qualifier === '') throw invalid(MISSING_QUALIFIER);
  if (!ACCOUNT_ID.test(accountId)) {
    throw invalid(`the account ID '${accountId}' is not an AWS account ID (12 digits)`);
  }
  if (!FUNCTION_NAME.test(functionName)) {
    throw invalid(
      `the function name '${functionName}' is not a Lambda function name (letters, digits, '-' and '_', at most 64)`,
    );
  }
  if (!QUALIFIER.test(qualifier)) {
    throw invalid(
      `the qualifier '${qualifier}' is neither a version number, $LATEST nor an alias name (letters, digits, '-' ` +
        "and '_'): a qualified ARN ends with exactly one of them",
    );
  }
  return { arn, partition, region, accountId, functionName, qualifier };
}

/** Checks the role to assume (400 naming `assume_role_arn` when it is not an IAM role ARN). */
export function checkRoleArn(roleArn: string): string {
  if (!ROLE_ARN.test(roleArn)) {
    throw new InvalidRequestFieldError(
      'assume_role_arn',
      `'${roleArn}' is not an IAM role ARN; expected arn:aws:iam::<12-digit account id>:role/<role name>, the role ` +
        'in your account whose trust policy lets this cluster assume it with the cluster name as external id',
    );
  }
  return roleArn;
}
