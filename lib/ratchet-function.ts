/**
 * A Lambda function with the house defaults: Node 24 on arm64, its code
 * bundled as lib/lambda-bundle.ts says (lib/function-code.ts), an explicit log
 * group with retention, JSON logs at INFO without the platform's START/END/REPORT
 * lines, and grants that travel with the configuration they need.
 */
import { type CfnResource, Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import { PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import {
  ApplicationLogLevel,
  Architecture,
  type FunctionOptions,
  Function as LambdaFunction,
  LoggingFormat,
  Runtime,
  SystemLogLevel,
  Tracing,
} from 'aws-cdk-lib/aws-lambda';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { ISecret } from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';
import { functionCode } from './function-code.ts';

export interface RatchetFunctionProps extends FunctionOptions {
  /** Path of the handler module, relative to the project root; it exports `handler`. */
  entry: string;
}

export class RatchetFunction extends LambdaFunction {
  constructor(scope: Construct, id: string, props: RatchetFunctionProps) {
    const logGroup = new LogGroup(scope, `${id}Logs`, { retention: RetentionDays.ONE_MONTH, removalPolicy: RemovalPolicy.RETAIN });
    // Instead of the AWSLambdaBasicExecutionRole managed policy (logs on *): write to this log group only.
    const role = new Role(scope, `${id}Role`, { assumedBy: new ServicePrincipal('lambda.amazonaws.com') });
    role.addToPolicy(new PolicyStatement({ actions: ['logs:CreateLogStream', 'logs:PutLogEvents'], resources: [logGroup.logGroupArn] }));
    super(scope, id, {
      role,
      runtime: Runtime.NODEJS_24_X,
      architecture: Architecture.ARM_64,
      memorySize: 256,
      timeout: Duration.seconds(10),
      loggingFormat: LoggingFormat.JSON,
      // Lambda drops lines under the level before they reach CloudWatch (and tells Powertools, AWS_LAMBDA_LOG_LEVEL).
      applicationLogLevelV2: ApplicationLogLevel.INFO,
      // The platform's START, END and REPORT lines are INFO: at WARN only its errors are kept (its metrics say the rest).
      systemLogLevelV2: SystemLogLevel.WARN,
      // Lambda's own sampling when it starts a trace (see RatchetProps.tracing).
      tracing: Tracing.ACTIVE,
      logGroup,
      ...props,
      handler: 'index.handler',
      // The Lambda runtime ships the AWS SDK v3, but the bundle pins the version tested here.
      code: functionCode(props.entry),
      // No --enable-source-maps: loading the maps costs every cold start; each .map sits beside its chunk in the asset.
      environment: { POWERTOOLS_SERVICE_NAME: 'ratchet', ...props.environment },
    });
    // cfn-lint W3005: CDK makes the function depend on its role (so the role's inline policy exists before the
    // first invocation) beside the GetAtt that already orders them. Harmless, and CDK's to emit.
    (this.node.defaultChild as CfnResource).addMetadata('cfn-lint', { config: { ignore_checks: ['W3005'] } });
    Validations.of(role).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason:
        'xray:PutTraceSegments and xray:PutTelemetryRecords (active tracing), and dynamodb:ListStreams for a stream event source, have no resource-level permissions.',
    });
    Validations.of(this).acknowledge({
      id: 'AwsSolutions-L1',
      reason: 'Pinned to nodejs24.x on purpose: the bundles are built for Node 24 and CI runs the tests on it (and on 20 locally).',
    });
  }

  /**
   * The table's name in `variable`, plus exactly the DynamoDB actions this
   * function uses on it. Unlike `table.grant`, no access to its indexes.
   */
  bindTable(variable: string, table: ITable, actions: string[]): this {
    this.addEnvironment(variable, table.tableName);
    this.addToRolePolicy(new PolicyStatement({ actions: actions.map((action) => `dynamodb:${action}`), resources: [table.tableArn] }));
    return this;
  }

  /** Exactly these actions on one index of the table. */
  bindIndex(table: ITable, index: string, actions: string[]): this {
    this.addToRolePolicy(
      new PolicyStatement({ actions: actions.map((action) => `dynamodb:${action}`), resources: [`${table.tableArn}/index/${index}`] }),
    );
    return this;
  }

  /** `<variable>_ARN` names the secret; the function may read that secret's value only (GetSecretValue, nothing else). */
  bindSecret(variable: string, secret: ISecret): this {
    this.addEnvironment(`${variable}_ARN`, secret.secretArn);
    this.addToRolePolicy(new PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: [secret.secretArn] }));
    return this;
  }
}
