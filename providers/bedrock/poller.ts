/**
 * Polls Amazon Bedrock's batch inference jobs with the official
 * `@aws-sdk/client-bedrock` (`GetModelInvocationJob`, by the ARN rebuilt from
 * the job's name): the adapter behind reconcile for `bedrock-batch`. On AWS
 * the EventBridge rule's events nudge the jobs; off AWS they are polled only.
 *
 * The SDK is loaded on the first poll. Credentials are the AWS default chain
 * (one credential, label ''), the endpoint the SDK's own
 * (AWS_ENDPOINT_URL_BEDROCK honoured by the SDK) unless `endpoint` is given.
 * A job lives in one region and account: a name of another than this
 * deployment's is refused before anything is sent. Each call is tried at most
 * twice by the SDK (a throttle too, after its backoff), within `timeoutMs`; a
 * throttle that outlasts it holds the credential back a moment.
 */
import type { BedrockClient, BedrockClientConfig } from '@aws-sdk/client-bedrock';
import { isNameOfKind } from '../../core/names.ts';
import { type CallFailure, PacedKeys } from '../paced-keys.ts';
import {
  type KeyHealth,
  type PollAnswer,
  PollFailedError,
  type PollTarget,
  type ProviderPoller,
  UnknownProviderStateError,
} from '../port.ts';
import { type BedrockJobAnswer, bedrockJobOfName, eventFromBedrock } from './events.ts';

export interface BedrockPollerOptions {
  /** The deployment's region: the jobs polled are this region's. */
  region: string;
  /** The deployment's account: when given, a job of another account is refused unsent. */
  account?: string;
  /** Bedrock's control-plane endpoint; default the SDK's (AWS_ENDPOINT_URL_BEDROCK, else the region's). */
  endpoint?: string;
  /** Default the AWS default chain. */
  credentials?: BedrockClientConfig['credentials'];
  /** One request's time limit, in milliseconds. @default 10_000 */
  timeoutMs?: number;
  /** Where the credential's last answer is noted (label ''). */
  keyHealth?: KeyHealth;
  /** The pace of polls. @default 5 (a share of Bedrock's control-plane request quotas, which are per account and region). */
  requestsPerSecond?: number;
  /** Milliseconds since the epoch, for the throttle holds (default Date.now). */
  clock?: () => number;
}

export const DEFAULT_BEDROCK_REQUESTS_PER_SECOND = 5;
const DEFAULT_TIMEOUT_MS = 10_000;
/** One retry per call: reconcile's own backoff takes over from there. */
const MAX_ATTEMPTS = 2;

type Sdk = typeof import('@aws-sdk/client-bedrock');

export class BedrockPoller implements ProviderPoller {
  private loaded?: Promise<{ sdk: Sdk; client: BedrockClient }>;
  /** The one credential, paced and held back as paced-keys.ts says (its "key" is never sent: the SDK signs). */
  private readonly credential: PacedKeys;
  readonly labels = [''];

  constructor(private readonly options: BedrockPollerOptions) {
    this.credential = new PacedKeys([{ label: '', apiKey: '' }], {
      provider: 'Bedrock',
      requestsPerSecond: options.requestsPerSecond ?? DEFAULT_BEDROCK_REQUESTS_PER_SECOND,
      ...(options.keyHealth && { keyHealth: options.keyHealth }),
      ...(options.clock && { clock: options.clock }),
    });
  }

  async poll({ name, kind }: PollTarget): Promise<PollAnswer> {
    // The edge validates every name; this guards records written before it did.
    if (kind !== 'bedrock-batch' || !isNameOfKind(name, kind))
      return { kind: 'refused', reason: `not a well-formed ${kind} name for Bedrock`, note: 'invalid-name' };
    const job = bedrockJobOfName(name);
    const { region, account } = this.options;
    if (job.region !== region || (account !== undefined && job.account !== account))
      return {
        kind: 'refused',
        reason: `not in this deployment's region and account (${region}, ${account ?? 'any account'})`,
        note: 'other-project',
      };
    const { sdk, client } = await this.load();
    let answer: BedrockJobAnswer;
    try {
      answer = await this.credential.run(
        undefined,
        () => client.send(new sdk.GetModelInvocationJobCommand({ jobIdentifier: job.arn })),
        (error) => failureOf(sdk, error),
      );
    } catch (error) {
      if (error instanceof PollFailedError) throw error;
      const { status } = failureOf(sdk, error);
      if (status === 404) return { kind: 'not-found' };
      const what = error instanceof sdk.BedrockServiceException ? `${error.name} (${status})` : (error as Error).message;
      throw new PollFailedError(`Bedrock answered ${what}`, status);
    }
    try {
      return { kind: 'event', event: eventFromBedrock(name, answer) };
    } catch (error) {
      if (error instanceof UnknownProviderStateError) return { kind: 'unknown-state', raw: error.raw };
      throw new PollFailedError(`Bedrock answered what Ratchet cannot read for ${name}: ${(error as Error).message}`);
    }
  }

  private load(): Promise<{ sdk: Sdk; client: BedrockClient }> {
    this.loaded ??= import('@aws-sdk/client-bedrock').then((sdk) => ({
      sdk,
      client: new sdk.BedrockClient({
        region: this.options.region,
        ...(this.options.endpoint && { endpoint: this.options.endpoint }),
        ...(this.options.credentials && { credentials: this.options.credentials }),
        maxAttempts: MAX_ATTEMPTS,
        requestHandler: { requestTimeout: this.options.timeoutMs ?? DEFAULT_TIMEOUT_MS },
      }),
    }));
    return this.loaded;
  }
}

/** What the SDK's error says: its HTTP status (a ThrottlingException is a 429). */
function failureOf(sdk: Sdk, error: unknown): CallFailure {
  if (!(error instanceof sdk.BedrockServiceException)) return {};
  const status = error.$metadata.httpStatusCode;
  return typeof status === 'number' ? { status } : {};
}
