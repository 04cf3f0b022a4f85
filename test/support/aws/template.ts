/**
 * The synthesized template brought to life in moto, as CloudFormation would
 * create it: each table, secret, queue and event bus made from its own
 * properties in the template (named `<prefix>-<logical id>`), and every
 * reference in the template (Ref, Fn::GetAtt, Fn::Join, Fn::Sub, …) resolved
 * to those physical names. Functions are not created (moto's Lambda needs
 * Docker): the tests run their bundles with the environment the template
 * gives them, resolved here. Only what Ratchet's template uses is supported;
 * anything else throws, so a template change cannot pass unnoticed.
 */
import { CreateTableCommand, type CreateTableCommandInput, DynamoDBClient, type StreamViewType } from '@aws-sdk/client-dynamodb';
import { CreateEventBusCommand, EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { CreateSecretCommand, PutSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { MOTO_ACCOUNT, MOTO_CREDENTIALS, MOTO_REGION } from './moto.ts';

export interface CfnResource {
  Type: string;
  Properties: Record<string, unknown>;
}
export interface CfnTemplate {
  Resources: Record<string, CfnResource>;
  Outputs?: Record<string, { Value: unknown }>;
}
export interface PolicyStatement {
  Effect: 'Allow' | 'Deny';
  Action: string | string[];
  Resource: string | string[];
  Principal?: unknown;
  Condition?: Record<string, unknown>;
}
export interface PolicyDocument {
  Version?: string;
  Statement: PolicyStatement[];
}

type Physical = { ref: string; attributes: Record<string, string> };

/** The logical id of the one resource of `type` in `template` whose id starts with `prefix`. */
export function logicalIdIn(template: CfnTemplate, type: string, prefix: string): string {
  const ids = Object.entries(template.Resources)
    .filter(([id, resource]) => resource.Type === type && id.startsWith(prefix))
    .map(([id]) => id);
  if (ids.length !== 1) throw new Error(`expected one ${type} named ${prefix}…, found ${ids.length}`);
  return ids[0] as string;
}

export class TemplateWorld {
  private readonly physical = new Map<string, Physical>();
  private readonly clientConfig;

  constructor(
    readonly template: CfnTemplate,
    endpoint: string,
    private readonly prefix: string,
  ) {
    this.clientConfig = { endpoint, region: MOTO_REGION, credentials: MOTO_CREDENTIALS };
  }

  /** The logical id of the one resource of `type` whose id starts with `prefix`. */
  logicalId(type: string, prefix: string): string {
    return logicalIdIn(this.template, type, prefix);
  }

  resource(id: string): CfnResource {
    const resource = this.template.Resources[id];
    if (!resource) throw new Error(`no resource ${id} in the template`);
    return resource;
  }

  /** Creates the template's tables, secrets, queues (dead-letter queues first) and buses in moto. */
  async provision(): Promise<void> {
    const arn = (service: string, resource: string) => `arn:aws:${service}:${MOTO_REGION}:${MOTO_ACCOUNT}:${resource}`;
    for (const [id, resource] of Object.entries(this.template.Resources)) {
      const name = `${this.prefix}-${id}`;
      if (resource.Type === 'AWS::Lambda::Function')
        this.physical.set(id, { ref: name, attributes: { Arn: arn('lambda', `function:${name}`) } });
      if (resource.Type === 'AWS::IAM::Role')
        this.physical.set(id, { ref: name, attributes: { Arn: `arn:aws:iam::${MOTO_ACCOUNT}:role/${name}` } });
      if (resource.Type === 'AWS::Logs::LogGroup')
        this.physical.set(id, { ref: name, attributes: { Arn: arn('logs', `log-group:${name}:*`) } });
      if (resource.Type === 'AWS::SNS::Topic') this.physical.set(id, { ref: arn('sns', name), attributes: { TopicName: name } });
      if (resource.Type === 'AWS::Pipes::Pipe') this.physical.set(id, { ref: name, attributes: { Arn: arn('pipes', `pipe/${name}`) } });
      if (resource.Type === 'AWS::Events::Rule') this.physical.set(id, { ref: name, attributes: { Arn: arn('events', `rule/${name}`) } });
      if (resource.Type === 'AWS::ApiGatewayV2::Api') {
        const apiId = `api${this.prefix}`.slice(0, 10);
        this.physical.set(id, { ref: apiId, attributes: { ApiEndpoint: `https://${apiId}.execute-api.${MOTO_REGION}.amazonaws.com` } });
      }
    }
    const dynamodb = new DynamoDBClient(this.clientConfig);
    const secrets = new SecretsManagerClient(this.clientConfig);
    const sqs = new SQSClient(this.clientConfig);
    const events = new EventBridgeClient(this.clientConfig);
    try {
      for (const [id, resource] of this.ofType('AWS::DynamoDB::Table')) await this.createTable(dynamodb, id, resource);
      for (const [id, resource] of this.ofType('AWS::SecretsManager::Secret')) {
        const props = resource.Properties ?? {};
        const { ARN } = await secrets.send(
          new CreateSecretCommand({ Name: `${this.prefix}-${id}`, SecretString: String(props.SecretString ?? 'generated') }),
        );
        this.physical.set(id, { ref: ARN as string, attributes: {} });
      }
      // A queue's redrive policy names its dead-letter queue's ARN: those without one first.
      const queues = this.ofType('AWS::SQS::Queue').sort(
        ([, a], [, b]) => Number(!!a.Properties.RedrivePolicy) - Number(!!b.Properties.RedrivePolicy),
      );
      for (const [id, resource] of queues) await this.createQueue(sqs, id, resource);
      for (const [id, resource] of this.ofType('AWS::Events::EventBus')) {
        // The template names its bus; prefixed here, so that two worlds can share one moto.
        const name = `${this.prefix}-${String(this.resolve(resource.Properties.Name))}`;
        const { EventBusArn } = await events.send(new CreateEventBusCommand({ Name: name }));
        this.physical.set(id, { ref: name, attributes: { Arn: EventBusArn as string, Name: name } });
      }
    } finally {
      for (const client of [dynamodb, secrets, sqs, events]) client.destroy();
    }
  }

  ofType(type: string): Array<[string, CfnResource]> {
    return Object.entries(this.template.Resources).filter(([, resource]) => resource.Type === type);
  }

  private async createTable(client: DynamoDBClient, id: string, resource: CfnResource): Promise<void> {
    const props = resource.Properties as Omit<CreateTableCommandInput, 'StreamSpecification'> & {
      StreamSpecification?: { StreamViewType: StreamViewType };
    };
    const name = `${this.prefix}-${id}`;
    const { StreamSpecification: stream, KeySchema, AttributeDefinitions, BillingMode, GlobalSecondaryIndexes } = props;
    const { TableDescription } = await client.send(
      new CreateTableCommand({
        TableName: name,
        KeySchema,
        AttributeDefinitions,
        BillingMode,
        GlobalSecondaryIndexes,
        ...(stream && { StreamSpecification: { StreamEnabled: true, StreamViewType: stream.StreamViewType } }),
      }),
    );
    this.physical.set(id, {
      ref: name,
      attributes: {
        Arn: TableDescription?.TableArn as string,
        ...(TableDescription?.LatestStreamArn && { StreamArn: TableDescription.LatestStreamArn }),
      },
    });
  }

  private async createQueue(client: SQSClient, id: string, resource: CfnResource): Promise<void> {
    const props = resource.Properties as Record<string, unknown>;
    const fifo = props.FifoQueue === true;
    const name = `${this.prefix}-${id}${fifo ? '.fifo' : ''}`;
    const attributes: Record<string, string> = {};
    const known: Record<string, string> = {
      FifoQueue: 'FifoQueue',
      ContentBasedDeduplication: 'ContentBasedDeduplication',
      VisibilityTimeout: 'VisibilityTimeout',
      MessageRetentionPeriod: 'MessageRetentionPeriod',
      DeduplicationScope: 'DeduplicationScope',
      FifoThroughputLimit: 'FifoThroughputLimit',
      ReceiveMessageWaitTimeSeconds: 'ReceiveMessageWaitTimeSeconds',
    };
    for (const [property, value] of Object.entries(props)) {
      if (known[property]) attributes[known[property] as string] = String(value);
      else if (property === 'RedrivePolicy') attributes.RedrivePolicy = JSON.stringify(this.resolve(value));
      else if (!['QueueName', 'KmsMasterKeyId', 'SqsManagedSseEnabled', 'KmsDataKeyReusePeriodSeconds'].includes(property))
        throw new Error(`queue ${id}: property ${property} not supported by this test's provisioning`);
    }
    const { QueueUrl } = await client.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }));
    const { Attributes } = await client.send(new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['QueueArn'] }));
    this.physical.set(id, {
      ref: QueueUrl as string,
      attributes: { Arn: Attributes?.QueueArn as string, QueueName: name, QueueUrl: QueueUrl as string },
    });
  }

  /** A template value with every reference replaced by moto's physical names. */
  resolve(value: unknown): unknown {
    if (Array.isArray(value)) return value.map((item) => this.resolve(item));
    if (value === null || typeof value !== 'object') return value;
    const entries = Object.entries(value as Record<string, unknown>);
    const [key, argument] = entries[0] ?? [];
    if (entries.length === 1 && key === 'Ref') return this.ref(String(argument));
    if (entries.length === 1 && key === 'Fn::GetAtt') {
      const [id, attribute] = argument as [string, string];
      return this.getAtt(id, attribute);
    }
    if (entries.length === 1 && key === 'Fn::Join') {
      const [separator, parts] = argument as [string, unknown[]];
      return (this.resolve(parts) as unknown[]).join(separator);
    }
    if (entries.length === 1 && key === 'Fn::Select') {
      const [index, list] = argument as [number, unknown];
      return (this.resolve(list) as unknown[])[index];
    }
    if (entries.length === 1 && key === 'Fn::Split') {
      const [separator, source] = argument as [string, unknown];
      return String(this.resolve(source)).split(separator);
    }
    if (entries.length === 1 && key === 'Fn::Sub') {
      const [text, variables = {}] = (typeof argument === 'string' ? [argument] : argument) as [string, Record<string, unknown>?];
      return text.replace(/\$\{([^}]+)\}/g, (_, name: string) => {
        if (name in variables) return String(this.resolve(variables[name]));
        const [id, attribute] = name.split('.');
        return String(attribute ? this.getAtt(id as string, attribute) : this.ref(id as string));
      });
    }
    if (key?.startsWith('Fn::')) throw new Error(`${key} is not supported by this test's template resolver`);
    return Object.fromEntries(entries.map(([k, v]) => [k, this.resolve(v)]));
  }

  private ref(id: string): string {
    const pseudo: Record<string, string> = {
      'AWS::Region': MOTO_REGION,
      'AWS::AccountId': MOTO_ACCOUNT,
      'AWS::Partition': 'aws',
      'AWS::URLSuffix': 'amazonaws.com',
      'AWS::StackName': this.prefix,
    };
    if (pseudo[id]) return pseudo[id] as string;
    const physical = this.physical.get(id);
    if (!physical) throw new Error(`Ref ${id}: not provisioned (a ${this.template.Resources[id]?.Type ?? 'missing'} resource)`);
    return physical.ref;
  }

  private getAtt(id: string, attribute: string): string {
    const value = this.physical.get(id)?.attributes[attribute];
    if (value === undefined) throw new Error(`Fn::GetAtt ${id}.${attribute}: not provisioned`);
    return value;
  }

  /** The environment the template gives the function whose logical id starts with `prefix`. */
  environment(functionPrefix: string): Record<string, string> {
    const fn = this.resource(this.logicalId('AWS::Lambda::Function', functionPrefix));
    const variables = (fn.Properties.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables ?? {};
    return Object.fromEntries(Object.entries(variables).map(([name, value]) => [name, String(this.resolve(value))]));
  }

  /** The role's identity policies, as IAM would hold them: its own inline policies and every AWS::IAM::Policy attached to it. */
  rolePolicies(roleId: string): Array<{ name: string; policy: PolicyDocument }> {
    const role = this.resource(roleId);
    if ((role.Properties.ManagedPolicyArns as unknown[] | undefined)?.length)
      throw new Error(`${roleId} has managed policies: not simulated here`);
    const inline = ((role.Properties.Policies as Array<{ PolicyName: string; PolicyDocument: unknown }>) ?? []).map((p) => ({
      name: p.PolicyName,
      policy: this.resolve(p.PolicyDocument) as PolicyDocument,
    }));
    const attached = this.ofType('AWS::IAM::Policy')
      .filter(([, policy]) => (policy.Properties.Roles as Array<{ Ref?: string }>).some((r) => r.Ref === roleId))
      .map(([id, policy]) => ({ name: id, policy: this.resolve(policy.Properties.PolicyDocument) as PolicyDocument }));
    return [...inline, ...attached];
  }

  /** The role (logical id) a function runs with. */
  roleOf(functionPrefix: string): string {
    const fn = this.resource(this.logicalId('AWS::Lambda::Function', functionPrefix));
    const [roleId] = (fn.Properties.Role as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'];
    return roleId;
  }

  arnOf(id: string): string {
    return this.getAtt(id, 'Arn');
  }

  /** The URL of the provisioned queue with this ARN. */
  queueUrl(arn: string): string {
    const queue = [...this.physical.values()].find((p) => p.attributes.Arn === arn && p.attributes.QueueUrl);
    if (!queue) throw new Error(`no queue ${arn} provisioned`);
    return queue.attributes.QueueUrl as string;
  }

  /** A new value for the secret whose logical id starts with `prefix`, as `npm run connect` (or an operator) stores it. */
  async putSecret(prefix: string, value: string): Promise<void> {
    const secrets = new SecretsManagerClient(this.clientConfig);
    try {
      const SecretId = this.ref(this.logicalId('AWS::SecretsManager::Secret', prefix));
      await secrets.send(new PutSecretValueCommand({ SecretId, SecretString: value }));
    } finally {
      secrets.destroy();
    }
  }
}
