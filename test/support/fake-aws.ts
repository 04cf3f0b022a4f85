/**
 * A fake of the two AWS APIs `npm run connect` calls besides DynamoDB, on
 * 127.0.0.1, spoken to by the real AWS SDK clients (point them here with
 * AWS_ENDPOINT_URL_CLOUDFORMATION and AWS_ENDPOINT_URL_SECRETS_MANAGER):
 * CloudFormation `DescribeStacks` (query protocol, XML answers) and Secrets
 * Manager `GetSecretValue`/`PutSecretValue` (JSON 1.1), with their error shapes.
 *
 * Only test/e2e/connect.test.ts still uses it, for one thing moto cannot do
 * without moving every test's clock: age a secret's version by 25 hours (the
 * `--rotate` grace). Everything else of the AWS path runs on moto.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

interface SecretVersion {
  value: string;
  versionId: string;
  createdAt: Date;
}

export class FakeAws {
  readonly stacks = new Map<string, Record<string, string>>();
  /** Every version of each secret by ARN, the current one last. */
  readonly secrets = new Map<string, SecretVersion[]>();
  /** Each call as `Service.Action`, in order. */
  readonly calls: string[] = [];
  private server?: Server;

  get endpoint(): string {
    if (!this.server) throw new Error('fake AWS not started');
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** A secret as the stack creates it: holding `value`. Returns its ARN. */
  createSecret(name: string, value: string): string {
    const arn = `arn:aws:secretsmanager:eu-west-1:123456789012:secret:${name}-${randomUUID().slice(0, 6)}`;
    this.secrets.set(arn, [{ value, versionId: randomUUID(), createdAt: new Date() }]);
    return arn;
  }

  current(arn: string): SecretVersion | undefined {
    return this.secrets.get(arn)?.at(-1);
  }

  async start(): Promise<this> {
    this.server = createServer(async (req, res) => {
      const body = await text(req);
      const target = String(req.headers['x-amz-target'] ?? '');
      if (target.startsWith('secretsmanager.')) return this.secretsManager(target.slice('secretsmanager.'.length), JSON.parse(body), res);
      const form = new URLSearchParams(body);
      this.calls.push(`CloudFormation.${form.get('Action')}`);
      if (form.get('Action') !== 'DescribeStacks') return xmlError(res, 400, 'InvalidAction', `${form.get('Action')} is not faked`);
      const name = form.get('StackName') ?? '';
      const outputs = this.stacks.get(name);
      if (!outputs) return xmlError(res, 400, 'ValidationError', `Stack with id ${name} does not exist`);
      const members = Object.entries(outputs)
        .map(([key, value]) => `<member><OutputKey>${key}</OutputKey><OutputValue>${xmlText(value)}</OutputValue></member>`)
        .join('');
      res
        .writeHead(200, { 'content-type': 'text/xml' })
        .end(
          `<DescribeStacksResponse xmlns="http://cloudformation.amazonaws.com/doc/2010-05-15/"><DescribeStacksResult><Stacks><member>` +
            `<StackName>${xmlText(name)}</StackName><StackId>arn:aws:cloudformation:eu-west-1:123456789012:stack/${xmlText(name)}/1</StackId>` +
            `<StackStatus>UPDATE_COMPLETE</StackStatus><CreationTime>2026-12-01T10:00:00.000Z</CreationTime><Outputs>${members}</Outputs>` +
            `</member></Stacks></DescribeStacksResult><ResponseMetadata><RequestId>${randomUUID()}</RequestId></ResponseMetadata></DescribeStacksResponse>`,
        );
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    return this;
  }

  private secretsManager(action: string, input: { SecretId?: string; SecretString?: string }, res: ServerResponse): unknown {
    this.calls.push(`SecretsManager.${action}`);
    const versions = this.secrets.get(input.SecretId ?? '');
    if (!versions) return jsonError(res, 'ResourceNotFoundException', "Secrets Manager can't find the specified secret.");
    const arn = input.SecretId as string;
    if (action === 'GetSecretValue') {
      const current = versions.at(-1) as SecretVersion;
      return json(res, 200, {
        ARN: arn,
        Name: arn.split(':').at(-1),
        SecretString: current.value,
        VersionId: current.versionId,
        VersionStages: ['AWSCURRENT'],
        CreatedDate: current.createdAt.getTime() / 1000,
      });
    }
    if (action === 'PutSecretValue') {
      if (!input.SecretString) return jsonError(res, 'InvalidParameterException', 'You must provide either SecretString or SecretBinary.');
      const version = { value: input.SecretString, versionId: randomUUID(), createdAt: new Date() };
      versions.push(version);
      return json(res, 200, { ARN: arn, Name: arn.split(':').at(-1), VersionId: version.versionId, VersionStages: ['AWSCURRENT'] });
    }
    return jsonError(res, 'InvalidRequestException', `${action} is not faked`);
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}

async function text(req: IncomingMessage): Promise<string> {
  let body = '';
  for await (const chunk of req) body += chunk;
  return body;
}

function xmlText(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/x-amz-json-1.1' }).end(JSON.stringify(body));
}

function jsonError(res: ServerResponse, type: string, message: string): void {
  res
    .writeHead(400, { 'content-type': 'application/x-amz-json-1.1', 'x-amzn-errortype': type })
    .end(JSON.stringify({ __type: type, message }));
}

function xmlError(res: ServerResponse, status: number, code: string, message: string): void {
  res
    .writeHead(status, { 'content-type': 'text/xml' })
    .end(
      `<ErrorResponse xmlns="http://cloudformation.amazonaws.com/doc/2010-05-15/"><Error><Type>Sender</Type><Code>${code}</Code>` +
        `<Message>${xmlText(message)}</Message></Error><RequestId>${randomUUID()}</RequestId></ErrorResponse>`,
    );
}
